#include "actors/net/report_channel.hpp"

#include "actors/net/connection_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/net/socket.hpp"

namespace troupe {

using namespace bulk;

namespace {

// Waits until `ch` has bytes to read or `until` passes: true when readable.
// Polls for reading only: the other direction belongs to another thread.
bool readable_before(const channel& ch, deadline until) {
  if (ch.has_buffered())
    return true;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    until - std::chrono::steady_clock::now());
  pollfd p{ch.fd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) > 0;
}

// Reads one whole frame before `until` (reading only, as above).
maybe_failure receive_before(channel& ch, frame_reader& in, deadline until) {
  for (;;) {
    maybe_failure error;
    if (in.receive_some(ch, error))
      return std::nullopt;
    if (error)
      return error;
    if (!readable_before(ch, until) && std::chrono::steady_clock::now() >= until)
      return connection_stopped("a frame begun was not finished in time");
  }
}

// What a report connection may carry: fields only, no tensors.
constexpr frame_limits report_limits{0, 0, max_report_meta_bytes};

} // namespace

// -- report_server --------------------------------------------------------------

struct report_server::connection : served_connection {
  channel ch;
  uint64_t key = 0;
  std::atomic<int32_t> worker{-1}; // its ticket's, once welcomed
  uint64_t owner = 0;              // likewise (set before worker)
  std::mutex sending;              // one answer at a time
};

report_server::report_server(batch_handler on_batch, report_server_options options,
                             maybe_failure& error)
  : on_batch_(std::move(on_batch)), options_(std::move(options)),
    server_(std::make_unique<connection_server<connection>>(options_.host, options_.port,
                                                            options_.max_connections, error)) {
  server_->start(
    [](connection& fresh, const std::vector<std::shared_ptr<connection>>& open) {
      auto taken = [&](uint64_t key) {
        return std::any_of(open.begin(), open.end(), [&](auto& c) { return c->key == key; });
      };
      do
        fresh.key = draw_secret();
      while (taken(fresh.key));
    },
    [this](const std::shared_ptr<connection>& conn) { serve(conn); },
    [](const std::string& peer, size_t open) {
      spdlog::warn("chief: refused a report connection from {}: {} are open already", peer, open);
    });
}

report_server::~report_server() {
  server_->stop(); // every connection's thread joined while what it uses is here
}

uint16_t report_server::port() const noexcept {
  return server_->port();
}

uint64_t report_server::issue_ticket(int32_t worker, uint64_t owner) {
  return tickets_.issue({worker, owner});
}

std::shared_ptr<report_server::connection> report_server::find(uint64_t key) const {
  return server_->find([key](const connection& c) { return c.key == key; });
}

std::optional<report_server::holder> report_server::worker_of(uint64_t key) const {
  auto conn = find(key);
  if (!conn || conn->worker < 0)
    return std::nullopt;
  return holder{conn->worker, conn->owner};
}

void report_server::close_worker(int32_t worker) {
  server_->for_each([worker](const connection& c) {
    if (c.worker == worker)
      ::shutdown(c.socket, SHUT_RDWR);
  });
}

bool report_server::answer(uint64_t key, uint64_t request, const meta_writer& fields) {
  auto conn = find(key);
  if (!conn)
    return false;
  std::lock_guard<std::mutex> turn{conn->sending};
  frame_writer out{frame_kind::grants, request, fields};
  if (auto err = send_frame(conn->ch, out, after(options_.send_timeout))) {
    spdlog::warn("chief: closed the report connection of worker:{} ({}): {}", conn->worker.load(),
                 conn->peer, err->message);
    ::shutdown(conn->socket, SHUT_RDWR);
    return false;
  }
  return true;
}

void report_server::refuse(uint64_t key, uint64_t request, const failure& why) {
  auto conn = find(key);
  if (!conn)
    return;
  std::lock_guard<std::mutex> turn{conn->sending};
  auto out = refusal_frame(request, why);
  send_frame(conn->ch, out, after(options_.send_timeout));
  ::shutdown(conn->socket, SHUT_RDWR);
}

// Under TLS the handshake first; then the first frame must be a hello with a
// ticket this server issued. A worker's new connection closes its older ones
// (a new plan, or a restarted worker).
bool report_server::welcome(connection& conn) {
  auto until = after(options_.hello_timeout);
  maybe_failure error;
  conn.ch = accept_channel(conn.accepted, options_.tls.get(), until, error);
  if (!conn.ch) {
    spdlog::warn("chief: refused a report connection from {}: {}", conn.peer,
                 error ? error->message : "no channel");
    return false;
  }
  frame_reader in{frame_limits{0, 0, max_hello_meta_bytes}};
  if (auto err = receive_before(conn.ch, in, until)) {
    spdlog::warn("chief: refused a report connection from {}: {}", conn.peer, err->message);
    return false;
  }
  auto fields = in.fields();
  fields.u64(); // the run: the ticket, drawn for this run, says it
  auto ticket = fields.u64();
  auto label = fields.text();
  std::string why;
  std::optional<holder> to;
  if (in.header().kind != static_cast<uint16_t>(frame_kind::hello))
    why = "its first frame is not a hello";
  else if (!fields.at_end())
    why = "a malformed hello";
  else if (!(to = tickets_.redeem(ticket)))
    why = "it does not show a ticket of this chief's plans, or one that opened a connection "
          "already or expired";
  if (!why.empty()) {
    spdlog::warn("chief: refused a report connection from {}: {}", conn.peer, why);
    auto out = refusal_frame(
      in.header().request, {errc::unauthorized, "the chief refused the report connection: " + why});
    send_frame(conn.ch, out, after(options_.hello_timeout));
    return false;
  }
  // The worker's older connections closed, and this one its own, at once.
  server_->locked([&](const std::vector<std::shared_ptr<connection>>& open) {
    for (auto& other : open)
      if (other->worker == to->worker)
        ::shutdown(other->socket, SHUT_RDWR);
    conn.owner = to->owner;
    conn.worker = to->worker;
  });
  spdlog::debug("chief: report connection from {} ({}, worker {})", conn.peer, label, to->worker);
  meta_writer meta;
  meta.i32(to->worker);
  frame_writer out{frame_kind::welcome, in.header().request, meta};
  std::lock_guard<std::mutex> turn{conn.sending};
  return !send_frame(conn.ch, out, until);
}

void report_server::serve(const std::shared_ptr<connection>& conn) {
  if (!welcome(*conn))
    return;
  frame_reader in{report_limits};
  for (;;) {
    in.next();
    // Idle between batches: wake each second to notice a stop.
    while (!server_->stopping() && !readable_before(conn->ch, after(std::chrono::seconds(1))))
      ;
    if (server_->stopping())
      return;
    if (auto err = receive_before(conn->ch, in, after(options_.send_timeout))) {
      if (err->code != errc::training_stopped)
        spdlog::warn("chief: closed the report connection of worker:{} ({}): {}",
                     conn->worker.load(), conn->peer, err->message);
      return;
    }
    if (in.header().kind != static_cast<uint16_t>(frame_kind::report)) {
      spdlog::warn("chief: closed the report connection of worker:{} ({}): a {} frame is not a "
                   "batch of reports",
                   conn->worker.load(), conn->peer, in.header().kind);
      return;
    }
    auto fields = in.fields();
    if (auto refused = on_batch_(conn->key, in.header().request, conn->worker, fields)) {
      spdlog::warn("chief: closed the report connection of worker:{} ({}): {}", conn->worker.load(),
                   conn->peer, refused->message);
      std::lock_guard<std::mutex> turn{conn->sending};
      auto out = refusal_frame(in.header().request, *refused);
      send_frame(conn->ch, out, after(options_.send_timeout));
      return;
    }
  }
}

// -- report_link ----------------------------------------------------------------

std::unique_ptr<report_link> report_link::open(const std::string& host, uint16_t port, uint64_t run,
                                               uint64_t ticket, const std::string& label,
                                               deadline until, maybe_failure& error,
                                               const tls_context* tls) {
  int32_t worker = -1; // the ticket's: the worker's own
  auto ch = open_ticketed(host, port, tls, {run, ticket, label}, until, worker, error);
  if (!ch)
    return nullptr;
  return std::unique_ptr<report_link>(new report_link(std::move(ch)));
}

report_link::~report_link() {
  stopping_ = true;
  ch_.shutdown();
  if (reader_.joinable())
    reader_.join();
}

void report_link::start(answer_handler on_answer, loss_handler on_loss) {
  on_answer_ = std::move(on_answer);
  on_loss_ = std::move(on_loss);
  reader_ = std::thread([this] { read_loop(); });
}

std::optional<uint64_t> report_link::send(const meta_writer& fields,
                                          std::chrono::milliseconds within) {
  maybe_failure err;
  uint64_t request = 0;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (lost_)
      return std::nullopt;
    request = ++request_;
    due_[request] = after(within);
    frame_writer out{frame_kind::report, request, fields};
    err = send_frame(ch_, out, after(within));
  }
  if (err) {
    lose(*err);
    return std::nullopt;
  }
  return request;
}

void report_link::lose(const failure& why) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (lost_)
      return;
    lost_ = true;
  }
  ch_.shutdown();
  if (on_loss_ && !stopping_) // not while destroyed: its owner is going
    on_loss_(why);
}

void report_link::read_loop() {
  frame_reader in{report_limits};
  while (!stopping_) {
    deadline wake = after(std::chrono::seconds(1));
    bool overdue = false;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      auto now = std::chrono::steady_clock::now();
      for (auto& [request, due] : due_) {
        overdue = overdue || due <= now;
        wake = std::min(wake, due);
      }
    }
    if (overdue) {
      lose({errc::training_stopped, "report channel: the chief did not answer a report in time"});
      return;
    }
    if (!readable_before(ch_, wake))
      continue;
    maybe_failure error;
    if (!in.receive_some(ch_, error)) {
      if (error) {
        lose(*error);
        return;
      }
      continue;
    }
    auto request = in.header().request;
    auto kind = static_cast<frame_kind>(in.header().kind);
    if (kind == frame_kind::refusal) {
      auto why = read_refusal(in.fields());
      lose(why ? *why : failure{errc::invalid_request, "report channel: a malformed refusal"});
      return;
    }
    bool asked = false;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      asked = due_.erase(request) > 0;
    }
    if (kind != frame_kind::grants || !asked) {
      lose({errc::invalid_request, "report channel: the chief sent a frame of kind "
                                     + std::to_string(in.header().kind) + " for request "
                                     + std::to_string(request) + ", which awaits no answer"});
      return;
    }
    auto fields = in.fields();
    on_answer_(request, fields);
    in.next();
  }
}

} // namespace troupe
