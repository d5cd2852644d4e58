#include "actors/net/bulk_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/net/wire_limits.hpp"

namespace troupe {

namespace {

using namespace bulk;

// The fields every push begins with: run, worker, step and the grant's proof.
bulk_push push_fields(meta_reader& fields) {
  bulk_push out;
  out.run = fields.u64();
  out.worker = fields.i32();
  out.step = fields.i64();
  out.proof = fields.u64();
  return out;
}

// Bytes of a next request already here (sent with the one just read).
bool bytes_waiting(const channel& ch) {
  if (ch.has_buffered())
    return true;
  pollfd here{ch.fd(), ch.wanted(false), 0};
  return ::poll(&here, 1, 0) > 0;
}

frame_limits current_limits() {
  return {max_wire_elements(), max_frame_bytes()};
}

} // namespace

bulk_server::bulk_server(bulk_endpoint endpoint, bulk_server_options options, maybe_failure& error)
  : endpoint_(std::move(endpoint)), options_(std::move(options)) {
  port_ = options_.port;
  listener_ = listen_on(options_.host, port_, error);
  if (!listener_)
    return;
  acceptor_ = std::thread([this] { accept_loop(); });
}

bulk_server::~bulk_server() {
  stopping_ = true;
  if (listener_)
    ::shutdown(listener_.get(), SHUT_RDWR);
  if (acceptor_.joinable())
    acceptor_.join();
  std::lock_guard<std::mutex> guard{mutex_};
  for (auto& conn : connections_)
    ::shutdown(conn.socket, SHUT_RDWR);
  for (auto& conn : connections_)
    if (conn.thread.joinable())
      conn.thread.join();
}

void bulk_server::accept_loop() {
  while (!stopping_) {
    auto fd = accept_next(listener_, std::chrono::seconds(1));
    if (!fd || stopping_)
      continue;
    std::lock_guard<std::mutex> guard{mutex_};
    connections_.remove_if([](connection& c) {
      if (!c.finished)
        return false;
      c.thread.join();
      return true;
    });
    auto peer = peer_name(fd.get());
    if (connections_.size() >= options_.max_connections) {
      spdlog::warn("ps:{}: refused a bulk connection from {}: {} connections are open already",
                   options_.shard, peer, connections_.size());
      continue;
    }
    auto& conn = connections_.emplace_back();
    conn.socket = fd.get();
    conn.accepted = std::move(fd);
    conn.peer = std::move(peer);
    conn.thread = std::thread([this, &conn] {
      serve(conn);
      ::shutdown(conn.socket, SHUT_RDWR);
      conn.finished = true;
    });
  }
}

// Under TLS the handshake first (a certificate of the cluster CA); then the
// first frame must be a hello with a ticket the shard issued.
bool bulk_server::welcome(connection& conn) {
  auto until = after(options_.hello_timeout);
  maybe_failure error;
  conn.ch = accept_channel(conn.accepted, options_.tls.get(), until, error);
  if (!conn.ch) {
    spdlog::warn("ps:{}: refused a bulk connection from {}: {}", options_.shard, conn.peer,
                 error ? error->message : "no channel");
    return false;
  }
  // No tensor and no more than a hello's few fields may come before the
  // ticket is shown: nothing is allocated for a stranger.
  frame_reader in{frame_limits{0, 0, max_hello_meta_bytes}};
  if (auto err = receive_frame(conn.ch, in, until)) {
    spdlog::warn("ps:{}: refused a bulk connection from {}: {}", options_.shard, conn.peer,
                 err->message);
    return false;
  }
  auto fields = in.fields();
  auto run = fields.u64();
  auto ticket = fields.u64();
  auto label = fields.text();
  std::string why;
  std::optional<int32_t> worker;
  if (in.header().kind != static_cast<uint16_t>(frame_kind::hello))
    why = "its first frame is not a hello";
  else if (!fields.at_end())
    why = "a malformed hello";
  else if (!(worker = tickets_.redeem(ticket)))
    why = "it does not show a ticket this shard issued, or shows one that opened a connection "
          "already or expired (a peer of this run asks for one over the control connection)";
  if (!why.empty()) {
    spdlog::warn("ps:{}: refused a bulk connection from {}: {}", options_.shard, conn.peer, why);
    auto out = refusal_frame(in.header().request,
                             {errc::unauthorized, "ps:" + std::to_string(options_.shard)
                                                    + " refused the bulk connection: " + why});
    send_frame(conn.ch, out, after(options_.hello_timeout));
    return false;
  }
  conn.worker = *worker;
  spdlog::debug("ps:{}: bulk connection from {} ({}, run {}, worker {})", options_.shard, conn.peer,
                label, run, conn.worker);
  meta_writer meta;
  meta.i32(options_.shard);
  frame_writer out{frame_kind::welcome, in.header().request, meta};
  return !send_frame(conn.ch, out, after(options_.request_timeout));
}

void bulk_server::serve(connection& conn) {
  if (!welcome(conn))
    return;
  frame_reader in{current_limits()};
  in.pause_before_data(true);
  auto push = endpoint_.open_pusher();
  bulk_endpoint::row_puller rows; // opened at the first pull of rows
  for (;;) {
    if (conn.request_read) {
      conn.request_read = false;
    } else {
      in.next();
      // Idle between requests: wake each second to notice a stop.
      maybe_failure idle;
      while (!stopping_ && !wait_for(conn.ch, false, after(std::chrono::seconds(1)), idle))
        idle.reset();
      if (stopping_)
        return;
      if (auto err = receive_frame(conn.ch, in, after(options_.request_timeout))) {
        if (err->code != errc::training_stopped)
          spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                       err->message);
        return;
      }
    }
    if (!answer(conn, in, push, rows))
      return;
  }
}

// A turn in one direction. A connection that had to wait for one shares
// the link with others from then on: its kernel buffers shrink to what the
// link needs in flight, so that what waits for its turn does not move
// beside the transfer under way (the kernel's autotuned buffers hold
// megabytes). A connection that never waits keeps them.
std::unique_lock<std::mutex> bulk_server::take_turn(connection& conn, std::mutex& direction) {
  std::unique_lock<std::mutex> turn{direction, std::try_to_lock};
  if (turn.owns_lock())
    return turn;
  if (!conn.shares_link) {
    conn.shares_link = true;
    for (int option : {SO_SNDBUF, SO_RCVBUF})
      ::setsockopt(conn.socket, SOL_SOCKET, option, &options_.shared_link_buffer,
                   sizeof(options_.shared_link_buffer));
  }
  turn.lock();
  return turn;
}

// A request that carries no tensors (a pull, a fetch): false, with the
// refusal sent, when its fields do not end where its meta section does.
bool bulk_server::complete_request(connection& conn, frame_reader& in, const meta_reader& fields,
                                   const char* what) {
  if (!fields.at_end() || in.header().data_bytes != 0)
    return refuse_malformed(conn, in, what);
  in.read_data(); // none
  return true;
}

bool bulk_server::refuse_malformed(connection& conn, frame_reader& in, const char* what) {
  reply(conn, refusal_frame(in.header().request, {errc::invalid_request,
                                                  std::string("bulk frame: a malformed ") + what}));
  return false; // its data, if any, was never read: the connection closes
}

// The endpoint's answer to a pull or a fetch: the refusal (logged when the
// peer showed no right to it), or the values written from where they are.
bool bulk_server::reply_values(connection& conn, uint64_t request, const maybe_failure& refused,
                               const char* what, const tensor_refs& values, int64_t version) {
  if (refused) {
    if (refused->code == errc::unauthorized)
      spdlog::warn("ps:{}: refused a bulk {} from {}: {}", options_.shard, what, conn.peer,
                   refused->message);
    return reply(conn, refusal_frame(request, *refused));
  }
  meta_writer meta{values};
  meta.i64(version);
  return reply(conn, frame_writer{frame_kind::pull_reply, request, meta, values});
}

// A pull, answered here from the shard's store: the values themselves,
// pinned in this connection's turn and written from where they are.
bool bulk_server::answer_pull(connection& conn, frame_reader& in) {
  auto fields = in.fields();
  auto run = fields.u64();
  auto names = fields.names();
  auto precision = fields.i32();
  if (!complete_request(conn, in, fields, "pull"))
    return false;
  auto turn = take_turn(conn, outbound_);
  std::vector<std::shared_ptr<const tensor>> pinned; // held until the reply is sent
  int64_t version = 0;
  auto refused = endpoint_.pull(run, names, precision, pinned, version);
  tensor_refs values;
  for (auto& v : pinned)
    values.push_back(v.get());
  return reply_values(conn, in.header().request, refused, "pull", values, version);
}

// A tensor of a checkpoint's copy (the chief's writer), moved out of the
// copy and written from where it is, in this connection's outbound turn.
bool bulk_server::answer_fetch(connection& conn, frame_reader& in) {
  auto fields = in.fields();
  auto run = fields.u64();
  auto ticket = fields.u64();
  auto index = fields.i32();
  if (!complete_request(conn, in, fields, "fetch"))
    return false;
  auto turn = take_turn(conn, outbound_);
  tensor value;
  int64_t version = 0;
  maybe_failure refused = endpoint_.fetch ? endpoint_.fetch(run, ticket, index, value, version)
                                          : failure{errc::invalid_request,
                                                    "this server holds no checkpoint copies"};
  return reply_values(conn, in.header().request, refused, "fetch", tensor_refs{&value}, version);
}

// A push, handed to the shard as the message a BASP peer sends, or refused.
bool bulk_server::answer_push(connection& conn, frame_reader& in,
                              const bulk_endpoint::pusher& push) {
  bulk_push request;
  auto what = in.header().kind == static_cast<uint16_t>(frame_kind::push_rows) ? "push of rows"
                                                                               : "push";
  switch (check_push(conn, in, request)) {
    case push_check::accepted:
      return apply_push(conn, in, std::move(request), push);
    case push_check::malformed:
      return refuse_malformed(conn, in, what);
    case push_check::other_worker:
      return refuse_other_worker(conn, in, request.worker, what);
    case push_check::too_many_keys:
      return within_row_bound(conn, in, in.shapes()[0][0]);
  }
  return false;
}

// A dense push names its variables; rows come as keys [n, 2], counts [n]
// and summed gradients [n, dim].
bulk_server::push_check bulk_server::check_push(const connection& conn, const frame_reader& in,
                                                bulk_push& request) const {
  auto fields = in.fields();
  request = push_fields(fields);
  if (in.header().kind == static_cast<uint16_t>(frame_kind::push)) {
    request.precision = fields.i32();
    request.names = fields.names();
    if (!fields.at_end())
      return push_check::malformed;
  } else {
    request.table = fields.i32();
    auto& shapes = in.shapes();
    bool shaped = shapes.size() == 3 && shapes[0].size() == 2 && shapes[0][1] == 2
                  && shapes[1] == shape_t{shapes[0][0]} && shapes[2].size() == 2
                  && shapes[2][0] == shapes[0][0];
    if (!fields.at_end() || !shaped || request.table < 0)
      return push_check::malformed;
    if (request.worker == conn.worker
        && shapes[0][0] > (endpoint_.max_row_keys ? endpoint_.max_row_keys() : 0))
      return push_check::too_many_keys;
  }
  return request.worker == conn.worker ? push_check::accepted : push_check::other_worker;
}

bool bulk_server::refuse_other_worker(connection& conn, frame_reader& in, int32_t worker,
                                      const char* what) {
  endpoint_.unauthorized_push();
  auto why = "ps:" + std::to_string(options_.shard) + " refused a bulk " + what
             + " as worker:" + std::to_string(worker) + ": this connection's ticket was issued "
             + (conn.worker < 0 ? std::string("for reading only")
                                : "to worker:" + std::to_string(conn.worker));
  spdlog::warn("{} (from {})", why, conn.peer);
  in.skip_data(); // read, not stored: the sender reads the refusal
  if (receive_frame(conn.ch, in, after(options_.request_timeout)))
    return false;
  return reply(conn, refusal_frame(in.header().request, {errc::unauthorized, why}));
}

bool bulk_server::within_row_bound(connection& conn, frame_reader& in, int64_t keys) {
  int64_t bound = endpoint_.max_row_keys ? endpoint_.max_row_keys() : 0;
  if (keys <= bound)
    return true;
  auto why = "ps:" + std::to_string(options_.shard) + " refused a request of "
             + std::to_string(keys) + " embedding keys: at most " + std::to_string(bound)
             + " per request" + (bound == 0 ? " (this server serves no rows)" : "");
  spdlog::warn("{} (from {})", why, conn.peer);
  reply(conn, refusal_frame(in.header().request, {errc::invalid_request, why}));
  return false; // its data was never read
}

// A step sends its rows and then its dense gradients together: the second
// push is already on the connection when the first is handed over, and is
// handed over before the first is awaited, so the shard takes both at one
// wake-up. Only after rows, which hold no turn: a second dense push would
// wait for the turn the first holds. Anything else read ahead is answered
// next, once the first push is.
bool bulk_server::apply_push(connection& conn, frame_reader& in, bulk_push request,
                             const bulk_endpoint::pusher& push) {
  handed_push first;
  if (!hand_over(conn, in, std::move(request), push, first))
    return false;
  if (!first.rows || !bytes_waiting(conn.ch))
    return settle(conn, first, push);
  in.next();
  if (auto err = receive_frame(conn.ch, in, after(options_.request_timeout))) {
    settle(conn, first, push);
    return false;
  }
  bulk_push next;
  auto kind = static_cast<frame_kind>(in.header().kind);
  if ((kind == frame_kind::push || kind == frame_kind::push_rows)
      && check_push(conn, in, next) == push_check::accepted) {
    handed_push second;
    if (!hand_over(conn, in, std::move(next), push, second)) {
      settle(conn, first, push);
      return false;
    }
    return settle(conn, first, push) && settle(conn, second, push);
  }
  conn.request_read = true;
  return settle(conn, first, push);
}

// Dense gradients are read into the storage the turns share, so the turn
// is held until the shard let go of it. Rows are read into the
// connection's own storage and the turn ends once they are in: the next
// connection's rows arrive while the shard applies these.
bool bulk_server::hand_over(connection& conn, frame_reader& in, bulk_push request,
                            const bulk_endpoint::pusher& push, handed_push& out) {
  out.request = in.header().request;
  out.rows = request.table >= 0;
  auto until = after(options_.request_timeout);
  auto turn = take_turn(conn, inbound_);
  in.lend(out.rows ? std::move(conn.row_push) : std::move(push_storage_));
  in.read_data();
  if (auto err = receive_frame(conn.ch, in, until)) {
    spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                 err->message);
    return false;
  }
  auto& data = in.tensors();
  if (out.rows) {
    turn.unlock();
    // Keys and counts leave the frame's storage as the message needs them;
    // the gradients travel in it.
    keys_of(data[0], request.keys);
    counts_of(data[1], request.keys.size(), request.counts);
    request.gradients.push_back(std::move(data[2]));
    conn.row_push = std::move(data);
  } else {
    request.gradients = std::move(data);
    out.turn = std::move(turn);
  }
  push.hand_over(request);
  out.push = std::move(request);
  return true;
}

bool bulk_server::settle(connection& conn, handed_push& handed, const bulk_endpoint::pusher& push) {
  auto answer = push.await(handed.push, options_.request_timeout);
  if (handed.rows) {
    if (!handed.push.gradients.empty() && conn.row_push.size() == 3)
      conn.row_push[2] = std::move(handed.push.gradients[0]);
  } else {
    push_storage_ = std::move(handed.push.gradients);
    handed.turn.unlock(); // the reply is small: no turn needed
  }
  std::optional<frame_writer> out;
  if (answer.version) {
    meta_writer meta;
    meta.i64(*answer.version);
    out.emplace(frame_kind::push_reply, handed.request, meta);
  } else if (answer.refused) {
    out = refusal_frame(handed.request, *answer.refused);
  }
  // No answer (the shard is gone, or timed out): the peer sees the connection close.
  return out && reply(conn, *out);
}

// A pull of rows, answered by the shard's endpoint with a BASP peer's
// checks (run, table, keys), then written from the rows it returned.
bool bulk_server::answer_rows(connection& conn, frame_reader& in, bulk_endpoint::row_puller& rows) {
  auto fields = in.fields();
  auto run = fields.u64();
  auto table = fields.i32();
  auto& shapes = in.shapes();
  if (!fields.at_end() || shapes.size() != 1 || shapes[0].size() != 2 || shapes[0][1] != 2)
    return refuse_malformed(conn, in, "pull of rows");
  if (!within_row_bound(conn, in, shapes[0][0]))
    return false;
  in.lend(std::move(conn.row_keys));
  in.read_data();
  if (auto err = receive_frame(conn.ch, in, after(options_.request_timeout))) {
    spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                 err->message);
    return false;
  }
  std::vector<int64_t> keys;
  keys_of(in.tensors()[0], keys);
  conn.row_keys = std::move(in.tensors());
  if (!rows && endpoint_.open_row_puller)
    rows = endpoint_.open_row_puller();
  if (!rows)
    return reply(conn, refusal_frame(in.header().request, {errc::invalid_request,
                                                           "this server holds no embedding rows"}));
  auto answer = rows(run, table, std::move(keys), options_.request_timeout);
  if (!answer.answered)
    return false; // the peer sees the connection close
  auto turn = take_turn(conn, outbound_);
  return reply_values(conn, in.header().request, answer.refused, "pull of rows",
                      tensor_refs{&answer.rows}, 0);
}

bool bulk_server::reply(connection& conn, frame_writer out) {
  return !send_frame(conn.ch, out, after(options_.request_timeout));
}

bool bulk_server::answer(connection& conn, frame_reader& in, const bulk_endpoint::pusher& push,
                         bulk_endpoint::row_puller& rows) {
  switch (static_cast<frame_kind>(in.header().kind)) {
    case frame_kind::rows:
      return answer_rows(conn, in, rows);
    case frame_kind::push_rows:
      return answer_push(conn, in, push);
    case frame_kind::pull:
      return answer_pull(conn, in);
    case frame_kind::fetch:
      return answer_fetch(conn, in);
    case frame_kind::push:
      return answer_push(conn, in, push);
    default:
      spdlog::warn("ps:{}: closed the bulk connection from {}: a {} frame is not a request",
                   options_.shard, conn.peer, in.header().kind);
      return false;
  }
}

} // namespace troupe
