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

frame_limits current_limits() {
  return {max_wire_elements(), max_frame_bytes()};
}

} // namespace

bulk_server::bulk_server(bulk_endpoint endpoint, bulk_server_options options, maybe_failure& error)
  : endpoint_(std::move(endpoint)), options_(std::move(options)),
    server_(options_.host, options_.port, options_.max_connections, error) {
  server_.start(
    nullptr, [this](const std::shared_ptr<connection>& conn) { serve(*conn); },
    [this](const std::string& peer, size_t open) {
      spdlog::warn("ps:{}: refused a bulk connection from {}: {} connections are open already",
                   options_.shard, peer, open);
    });
}

bulk_server::~bulk_server() {
  server_.stop(); // every connection's thread joined while what it uses is here
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
  for (;;) {
    in.next();
    // Idle between requests: wake each second to notice a stop.
    maybe_failure idle;
    while (!server_.stopping() && !wait_for(conn.ch, false, after(std::chrono::seconds(1)), idle))
      idle.reset();
    if (server_.stopping())
      return;
    if (auto err = receive_frame(conn.ch, in, after(options_.request_timeout))) {
      if (err->code != errc::training_stopped)
        spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                     err->message);
      return;
    }
    if (!answer(conn, in, push))
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

// A request that carries no tensors (a fetch): false, with the refusal
// sent, when its fields do not end where its meta section does.
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

// The table part of a request's fields: a count, then each table's id.
// Each table brings `per_table` tensors after `first` others, its keys
// [n, 2] first (at most max_row_keys of them).
bulk_server::request_check bulk_server::read_tables(meta_reader& fields, const frame_reader& in,
                                                    size_t first, size_t per_table,
                                                    std::vector<bulk_rows>& tables) const {
  auto count = fields.i32();
  if (count < 0 || static_cast<size_t>(count) > max_request_tables)
    return request_check::malformed;
  tables.resize(static_cast<size_t>(count));
  for (auto& rows : tables)
    rows.table = fields.i32();
  auto& shapes = in.shapes();
  if (!fields.at_end() || shapes.size() != first + per_table * tables.size())
    return request_check::malformed;
  for (size_t t = 0; t < tables.size(); ++t) {
    auto& keys = shapes[first + per_table * t];
    if (tables[t].table < 0 || keys.size() != 2 || keys[1] != 2)
      return request_check::malformed;
    if (per_table == 3) { // a push's counts [n] and gradients [n, dim]
      auto& counts = shapes[first + 3 * t + 1];
      auto& grads = shapes[first + 3 * t + 2];
      if (counts != shape_t{keys[0]} || grads.size() != 2 || grads[0] != keys[0])
        return request_check::malformed;
    }
    if (keys[0] > endpoint_.max_row_keys)
      return request_check::too_many_keys;
  }
  return request_check::accepted;
}

bulk_server::request_check bulk_server::check_pull(const frame_reader& in,
                                                   bulk_pull& request) const {
  auto fields = in.fields();
  request.run = fields.u64();
  request.names = fields.names();
  request.precision = fields.i32();
  return read_tables(fields, in, 0, 1, request.tables);
}

// A pull, answered here through the shard's endpoint: values pinned in this
// connection's outbound turn and written from where they are, then each
// table's rows.
bool bulk_server::answer_pull(connection& conn, frame_reader& in) {
  bulk_pull request;
  switch (check_pull(in, request)) {
    case request_check::accepted:
      break;
    case request_check::too_many_keys:
      return refuse_too_many_keys(conn, in);
    default:
      return refuse_malformed(conn, in, "pull");
  }
  in.lend(std::move(conn.pull_keys));
  in.read_data();
  if (auto err = receive_frame(conn.ch, in, after(options_.request_timeout))) {
    spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                 err->message);
    return false;
  }
  auto& keys = in.tensors();
  for (size_t t = 0; t < request.tables.size(); ++t)
    keys_of(keys[t], request.tables[t].keys);
  conn.pull_keys = std::move(keys);
  auto turn = take_turn(conn, outbound_);
  bulk_pulled pulled; // its pins held until the reply is sent
  auto refused = endpoint_.pull(request, pulled);
  tensor_refs values;
  for (auto& v : pulled.values)
    values.push_back(v.get());
  for (auto& rows : pulled.rows)
    values.push_back(&rows);
  return reply_values(conn, in.header().request, refused, "pull", values, pulled.version);
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
  switch (check_push(conn, in, request)) {
    case request_check::accepted:
      return apply_push(conn, in, std::move(request), push);
    case request_check::malformed:
      return refuse_malformed(conn, in, "push");
    case request_check::other_worker:
      return refuse_other_worker(conn, in, request.worker);
    case request_check::too_many_keys:
      return refuse_too_many_keys(conn, in);
  }
  return false;
}

// A push names its variables (a gradient each) and its tables (keys [n, 2],
// counts [n] and summed gradients [n, dim] each).
bulk_server::request_check bulk_server::check_push(const connection& conn, const frame_reader& in,
                                                   bulk_push& request) const {
  auto fields = in.fields();
  request.run = fields.u64();
  request.worker = fields.i32();
  request.step = fields.i64();
  request.proof = fields.u64();
  request.precision = fields.i32();
  request.names = fields.names();
  auto tables = read_tables(fields, in, request.names.size(), 3, request.tables);
  if (tables != request_check::accepted)
    return tables;
  return request.worker == conn.worker ? request_check::accepted : request_check::other_worker;
}

bool bulk_server::refuse_other_worker(connection& conn, frame_reader& in, int32_t worker) {
  endpoint_.unauthorized_push();
  auto why = "ps:" + std::to_string(options_.shard) + " refused a bulk push as worker:"
             + std::to_string(worker) + ": this connection's ticket was issued "
             + (conn.worker < 0 ? std::string("for reading only")
                                : "to worker:" + std::to_string(conn.worker));
  spdlog::warn("{} (from {})", why, conn.peer);
  in.skip_data(); // read, not stored: the sender reads the refusal
  if (receive_frame(conn.ch, in, after(options_.request_timeout)))
    return false;
  return reply(conn, refusal_frame(in.header().request, {errc::unauthorized, why}));
}

bool bulk_server::refuse_too_many_keys(connection& conn, frame_reader& in) {
  auto why = "ps:" + std::to_string(options_.shard)
             + " refused a request of more embedding keys for a table than "
             + std::to_string(endpoint_.max_row_keys) + " a request"
             + (endpoint_.max_row_keys == 0 ? " (this server serves no rows)" : "");
  spdlog::warn("{} (from {})", why, conn.peer);
  reply(conn, refusal_frame(in.header().request, {errc::invalid_request, why}));
  return false; // its data was never read
}

// A push's data is read into the storage the turns share, so the inbound
// turn is held until the shard let go of it: the shard holds one push at a
// time, and a link carries one push at full speed instead of several at a
// fraction. Keys and counts leave the frame's storage as the message needs
// them; the gradients travel in it and come back.
bool bulk_server::apply_push(connection& conn, frame_reader& in, bulk_push request,
                             const bulk_endpoint::pusher& push) {
  auto request_number = in.header().request;
  auto until = after(options_.request_timeout);
  auto turn = take_turn(conn, inbound_);
  in.lend(std::move(push_storage_));
  in.read_data();
  if (auto err = receive_frame(conn.ch, in, until)) {
    spdlog::warn("ps:{}: closed the bulk connection from {}: {}", options_.shard, conn.peer,
                 err->message);
    return false;
  }
  auto& data = in.tensors();
  auto dense = request.names.size();
  for (size_t t = 0; t < request.tables.size(); ++t) {
    auto& rows = request.tables[t];
    keys_of(data[dense + 3 * t], rows.keys);
    counts_of(data[dense + 3 * t + 1], rows.keys.size(), rows.counts);
    rows.gradients = std::move(data[dense + 3 * t + 2]);
  }
  data.resize(dense);
  request.gradients = std::move(data);
  push.hand_over(request);
  auto answer = push.await(request, options_.request_timeout);
  // The storage back for the next push (the shard let go of it, or it is
  // fresh): the dense gradients, then each table's gradients.
  push_storage_ = std::move(request.gradients);
  for (auto& rows : request.tables) {
    push_storage_.emplace_back(); // keys: read again as bits
    push_storage_.emplace_back(); // counts
    push_storage_.push_back(std::move(rows.gradients));
  }
  turn.unlock(); // the reply is small: no turn needed
  std::optional<frame_writer> out;
  if (answer.version) {
    meta_writer meta;
    meta.i64(*answer.version).u64(answer.receipt);
    out.emplace(frame_kind::push_reply, request_number, meta);
  } else if (answer.refused) {
    out = refusal_frame(request_number, *answer.refused);
  }
  // No answer (the shard is gone, or timed out): the peer sees the connection close.
  return out && reply(conn, *out);
}

bool bulk_server::reply(connection& conn, frame_writer out) {
  return !send_frame(conn.ch, out, after(options_.request_timeout));
}

bool bulk_server::answer(connection& conn, frame_reader& in, const bulk_endpoint::pusher& push) {
  switch (static_cast<frame_kind>(in.header().kind)) {
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
