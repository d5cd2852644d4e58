#pragma once
// Async training's reports and grants on a connection of their own
// (docs/protocol.md, "Report channel"). A worker in another process sends
// the chief each batch of step reports as a frame of the bulk path's
// framing (fields only, no tensors), plain or under the same mutual TLS and
// records as the bulk path, and reads the grants back on that connection.
// Over CAF's openssl transport every report and every grant cost two system
// calls a record and a signal mask around each call (docs/results.md);
// here they cost a send and a receive.
//
// Requests overlap (a parked worker's grant may come after its next
// report's): every answer names its request. The server (the chief's side)
// reads each connection on a thread of its own and hands each batch to its
// handler; the chief answers from its own thread, at once or later, by the
// connection's key. The link (the worker's side) sends from the worker's
// thread and reads answers on a thread of its own. Free of CAF.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/net/frame.hpp"
#include "actors/net/ticket_book.hpp"

namespace troupe::bulk {
template <class Conn>
class connection_server; // connection_server.hpp
} // namespace troupe::bulk

namespace troupe {

struct report_server_options {
  std::string host;  ///< the chief's own address
  uint16_t port = 0; ///< 0: any free port (the plan tells the workers)
  size_t max_connections = 256;
  std::chrono::milliseconds hello_timeout{5000}; ///< handshake and hello
  std::chrono::milliseconds send_timeout{10000}; ///< one answer
  /// Mutual TLS with the cluster's certificates (null: plain TCP).
  std::shared_ptr<const bulk::tls_context> tls;
};

/// The most bytes of one batch's fields: 1,024 reports a batch
/// (train.report-every) of under 128 bytes each.
constexpr uint32_t max_report_meta_bytes = 256 * 1024;

class report_server {
public:
  /// A batch read off connection `key`, whose ticket was issued for
  /// `worker`: its request number and its fields. Called on the
  /// connection's thread; the answer may come from any thread, any time.
  /// A failure (malformed fields) is sent as a refusal and closes the
  /// connection.
  using batch_handler = std::function<maybe_failure(uint64_t key, uint64_t request, int32_t worker,
                                                    bulk::meta_reader& fields)>;

  /// Listens at once; `error` set when it cannot.
  report_server(batch_handler on_batch, report_server_options options, maybe_failure& error);
  ~report_server();
  report_server(const report_server&) = delete;
  report_server& operator=(const report_server&) = delete;

  uint16_t port() const noexcept;
  /// A ticket that opens one connection for `worker`, valid for a minute;
  /// `owner` is the caller's name for who holds the index (an admission),
  /// which worker_of tells back. A connection opened with it closes the
  /// worker's older ones.
  uint64_t issue_ticket(int32_t worker, uint64_t owner);
  struct holder {
    int32_t worker = -1;
    uint64_t owner = 0;
  };
  /// Who holds the live connection `key` names.
  std::optional<holder> worker_of(uint64_t key) const;
  /// Sends an answer on connection `key`; false when it is gone or the
  /// send failed (it is closed then).
  bool answer(uint64_t key, uint64_t request, const bulk::meta_writer& fields);
  /// Sends a refusal and closes the connection.
  void refuse(uint64_t key, uint64_t request, const failure& why);
  /// Closes the worker's connections (it was lost, or left).
  void close_worker(int32_t worker);

private:
  struct connection;
  void serve(const std::shared_ptr<connection>& conn);
  bool welcome(connection& conn);
  std::shared_ptr<connection> find(uint64_t key) const;

  batch_handler on_batch_;
  report_server_options options_;
  ticket_book<holder> tickets_;
  // Last: stopped before the rest goes. Behind a pointer: `connection` is
  // this file's own.
  std::unique_ptr<bulk::connection_server<connection>> server_;
};

/// The worker's side: one connection to the chief's report server.
class report_link {
public:
  /// An answer's request number and fields, on the link's thread.
  using answer_handler = std::function<void(uint64_t request, bulk::meta_reader& fields)>;
  /// Once, on the link's thread (or the sender's), when the link can carry
  /// no more: the chief refused a batch or closed, the connection broke, or
  /// an answer was not in within its time. Never while the link is
  /// destroyed.
  using loss_handler = std::function<void(const failure& why)>;

  /// Connects (under TLS with `tls`) and shows the ticket; null with
  /// `error` set when the chief is unreachable or refuses.
  static std::unique_ptr<report_link> open(const std::string& host, uint16_t port, uint64_t run,
                                           uint64_t ticket, const std::string& label,
                                           bulk::deadline until, maybe_failure& error,
                                           const bulk::tls_context* tls = nullptr);
  ~report_link();
  report_link(const report_link&) = delete;
  report_link& operator=(const report_link&) = delete;

  /// Starts reading answers on a thread of the link's own.
  void start(answer_handler on_answer, loss_handler on_loss);
  /// Sends a batch: its request number, whose answer is due within
  /// `within`; nullopt when the link is lost (the loss handler ran or runs).
  std::optional<uint64_t> send(const bulk::meta_writer& fields, std::chrono::milliseconds within);

private:
  explicit report_link(bulk::channel ch) : ch_(std::move(ch)) {}
  void read_loop();
  void lose(const failure& why);

  bulk::channel ch_;
  answer_handler on_answer_;
  loss_handler on_loss_;
  std::mutex mutex_; // guards sending, request_, due_ and lost_
  uint64_t request_ = 0;
  std::map<uint64_t, bulk::deadline> due_; // requests not yet answered
  bool lost_ = false;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

} // namespace troupe
