#pragma once
// The shard side of the bulk path (docs/protocol.md, "Bulk path"): a
// listening socket beside the shard's published BASP port and one thread
// per connection. A step's push (its dense gradients and its rows in one
// frame) is read straight into tensors and handed to the shard's
// endpoint, which has the shard take it as the same push message a BASP
// peer sends (in process, so nothing is serialised): one door, the
// shard's service, checks and counts both. A pull (values and rows) is
// answered by the connection's thread itself through the same service,
// written straight from the values it pins (copy-on-write): no hop through
// the shard actor, so a small pull costs about a TCP round trip. A
// connection's requests are answered in order, so a peer may send several
// (a push, then the next step's pull) before the first reply. A connection
// must open with a ticket the shard gave a peer of its run over BASP
// (bulk_atom): each ticket opens one connection, for the worker it was
// asked for (its pushes must name that worker; -1: pulls only), and expires
// unused after a minute; anything else is refused and closed. The shard
// owns its server: destroying it closes every connection and joins their
// threads. Free of CAF: the shard lends its endpoint.
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
#include <vector>

#include "actors/net/connection_server.hpp"
#include "actors/net/socket.hpp"
#include "actors/net/ticket_book.hpp"

namespace troupe {

/// The most tables one request may name.
constexpr size_t max_request_tables = 1024;

struct bulk_server_options {
  std::string host;  ///< the address to listen on: the shard's own
  uint16_t port = 0; ///< 0: any free port (the shard tells its peers)
  int32_t shard = 0; ///< for log lines
  size_t max_connections = 256;
  std::chrono::milliseconds hello_timeout{5000};    ///< a connection's first frame
  std::chrono::milliseconds request_timeout{30000}; ///< a frame once begun, and its answer
  /// The kernel send and receive buffers of a connection once it had to
  /// wait for its turn: small enough that what waits does not move beside
  /// the transfer under way, large enough for a LAN's bandwidth-delay product.
  int shared_link_buffer = 128 * 1024;
  /// Mutual TLS with the cluster's certificates (null: plain TCP): every
  /// connection's handshake must show a certificate of the cluster CA.
  std::shared_ptr<const bulk::tls_context> tls;
};

/// One embedding table's part of a request: the keys (and, in a push,
/// their occurrences and summed gradients [keys, dim]).
struct bulk_rows {
  int32_t table = 0;
  std::vector<int64_t> keys;
  std::vector<uint32_t> counts;
  tensor gradients;
};

/// A step's push read off a connection, for the shard to take whole: dense
/// gradients of `names` and each table's rows.
struct bulk_push {
  uint64_t run = 0;
  int32_t worker = -1;
  int64_t step = 0;
  uint64_t proof = 0;
  int32_t precision = 0; ///< a wire_precision, as the frame named it (the shard checks it)
  std::vector<std::string> names;
  std::vector<tensor> gradients;
  std::vector<bulk_rows> tables;
};

/// A pull read off a connection: the values of `names` at `precision` and
/// the rows of each table's keys.
struct bulk_pull {
  uint64_t run = 0;
  std::vector<std::string> names;
  int32_t precision = 0;
  std::vector<bulk_rows> tables;
};

/// The shard's answer to a pull: its version, the values pinned where they
/// lie, and each table's rows.
struct bulk_pulled {
  int64_t version = 0;
  std::vector<std::shared_ptr<const tensor>> values;
  std::vector<tensor> rows;
};

/// The shard's answer to a push: its version and receipt once taken, or
/// its refusal; neither when no answer came (the shard is gone or did not
/// answer in time).
struct bulk_push_answer {
  std::optional<int64_t> version;
  uint64_t receipt = 0;
  maybe_failure refused;
};

/// What the shard lends its bulk server. Every function is called from the
/// connections' threads and must be thread-safe.
struct bulk_endpoint {
  /// Values and rows for a pull, with the shard's own checks (its service's).
  std::function<maybe_failure(bulk_pull& pull, bulk_pulled& out)> pull;
  /// One connection's pushes: hand_over passes a push to the shard without
  /// waiting; await waits (at most `within`) for its answer, and gives the
  /// gradients' storage back in the push once the shard let go of it.
  struct pusher {
    std::function<void(bulk_push& push)> hand_over;
    std::function<bulk_push_answer(bulk_push& push, std::chrono::milliseconds within)> await;
  };
  /// A pusher for one connection (called on its thread, once).
  std::function<pusher()> open_pusher;
  /// Tensor `index` of the checkpoint copy that `ticket` names (each once,
  /// moved out: the shard frees it as it goes), with the copy's version.
  std::function<maybe_failure(uint64_t run, uint64_t ticket, int32_t index, tensor& out,
                              int64_t& version)>
    fetch;
  /// A push that named another worker than its connection's ticket.
  std::function<void()> unauthorized_push;
  /// The most keys one table's part of a request may name: checked before
  /// a request's keys are read, so nothing is allocated for a larger one.
  int64_t max_row_keys = 0;
};

class bulk_server {
public:
  /// Listens at once; a failure (logged by the caller) when it cannot.
  /// What `endpoint` reaches must outlive the server.
  bulk_server(bulk_endpoint endpoint, bulk_server_options options, maybe_failure& error);
  ~bulk_server();
  bulk_server(const bulk_server&) = delete;
  bulk_server& operator=(const bulk_server&) = delete;

  uint16_t port() const noexcept { return server_.port(); }
  /// A ticket that opens one connection, whose pushes must name `worker`
  /// (-1: none may push). Thread-safe.
  uint64_t issue_ticket(int32_t worker) { return tickets_.issue(worker); }

private:
  struct connection : bulk::served_connection {
    bulk::channel ch;
    bool shares_link = false;      // it waited for a turn: its buffers are small
    int32_t worker = -1;           // whose pushes it carries (its ticket's); -1: none
    std::vector<tensor> pull_keys; // a pull's keys, storage kept between requests
  };

  /// What the checks of a request's fields found.
  enum class request_check { accepted, malformed, other_worker, too_many_keys };

  void serve(connection& conn);
  bool welcome(connection& conn);
  /// One request and its reply; false when the connection must close.
  bool answer(connection& conn, bulk::frame_reader& in, const bulk_endpoint::pusher& push);
  bool answer_pull(connection& conn, bulk::frame_reader& in);
  bool answer_fetch(connection& conn, bulk::frame_reader& in);
  bool complete_request(connection& conn, bulk::frame_reader& in, const bulk::meta_reader& fields,
                        const char* what);
  /// Refuses a request whose fields or shapes are malformed; false (the
  /// connection closes: its data is never read).
  bool refuse_malformed(connection& conn, bulk::frame_reader& in, const char* what);
  bool reply_values(connection& conn, uint64_t request, const maybe_failure& refused,
                    const char* what, const bulk::tensor_refs& values, int64_t version);
  /// The tables a request names (after `first` tensors, `per_table` each).
  request_check read_tables(bulk::meta_reader& fields, const bulk::frame_reader& in, size_t first,
                            size_t per_table, std::vector<bulk_rows>& tables) const;
  /// A pull's fields and shapes (its keys not read yet) into `request`.
  request_check check_pull(const bulk::frame_reader& in, bulk_pull& request) const;
  /// A push: taken by the shard, or refused as its check says.
  bool answer_push(connection& conn, bulk::frame_reader& in, const bulk_endpoint::pusher& push);
  /// A push's fields and shapes (its data not read yet) into `request`.
  request_check check_push(const connection& conn, const bulk::frame_reader& in,
                           bulk_push& request) const;
  /// A push's data read in the inbound turn, into the storage the turns
  /// share (the turn then held until the shard let go of it), handed to
  /// the shard and answered.
  bool apply_push(connection& conn, bulk::frame_reader& in, bulk_push request,
                  const bulk_endpoint::pusher& push);
  /// A push naming another worker than the connection's ticket: counted,
  /// its data read and dropped, refused.
  bool refuse_other_worker(connection& conn, bulk::frame_reader& in, int32_t worker);
  /// A request naming more keys for a table than max_row_keys: refused
  /// before its keys are read (the connection closes: its data is never read).
  bool refuse_too_many_keys(connection& conn, bulk::frame_reader& in);
  bool reply(connection& conn, bulk::frame_writer out);
  std::unique_lock<std::mutex> take_turn(connection& conn, std::mutex& direction);

  bulk_endpoint endpoint_;
  bulk_server_options options_;
  // One push is read and one pull written at a time (turns in each
  // direction): a shard's link carries one transfer per direction at full
  // speed instead of several at a fraction, and the shard holds one pushed
  // gradient at a time, in storage the turns share.
  std::mutex inbound_;
  std::vector<tensor> push_storage_; // guarded by inbound_
  std::mutex outbound_;
  ticket_book<int32_t> tickets_;               // whose pushes each ticket's connection carries
  bulk::connection_server<connection> server_; // last: stopped before the rest goes
};

} // namespace troupe
