#pragma once
// The shard side of the bulk path (docs/protocol.md, "Bulk path"): a
// listening socket beside the shard's published BASP port and one thread
// per connection. A push is read straight into tensors and handed to the
// shard's endpoint, which applies it as the same push message a BASP peer
// sends (in process, so nothing is serialised): the shard's checks and
// counts apply. A pull is answered by the connection's thread itself from
// the values the endpoint pins (copy-on-write), written straight from them:
// no hop through the shard actor, so a small pull costs about a TCP round
// trip; a pull of rows likewise, from the rows the endpoint looks up. A
// connection's requests are answered in order, so a peer may send several
// before the first reply. A connection must open with a ticket the shard gave a peer of its
// run over BASP (bulk_atom): each ticket opens one connection, for the
// worker it was asked for (its pushes must name that worker; -1: pulls
// only), and expires unused after a minute; anything else is refused and
// closed. The shard owns its server: destroying it closes every connection
// and joins their threads. Free of CAF: the shard lends its endpoint.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <functional>

#include "actors/net/socket.hpp"
#include "actors/net/ticket_book.hpp"

namespace troupe {

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

/// A push read off a connection, for the shard to apply: dense gradients
/// of `names`, or (table >= 0) an embedding table's rows: `keys` with their
/// `counts`, their summed gradients the one tensor in `gradients`.
struct bulk_push {
  uint64_t run = 0;
  int32_t worker = -1;
  int64_t step = 0;
  uint64_t proof = 0;
  int32_t precision = 0; ///< a wire_precision, as the frame named it (the shard checks it)
  std::vector<std::string> names;
  std::vector<tensor> gradients;
  int32_t table = -1;
  std::vector<int64_t> keys;
  std::vector<uint32_t> counts;
};

/// The shard's answer to a pull of rows: the rows, or its refusal; neither
/// (answered false) when no answer came.
struct bulk_rows_answer {
  bool answered = false;
  tensor rows;
  maybe_failure refused;
};

/// The shard's answer to a push: its version once applied, or its refusal;
/// neither when no answer came (the shard is gone or did not answer in time).
struct bulk_push_answer {
  std::optional<int64_t> version;
  maybe_failure refused;
};

/// What the shard lends its bulk server. Every function is called from the
/// connections' threads and must be thread-safe.
struct bulk_endpoint {
  /// Pins the values of `names` for a pull of run `run` (their version in
  /// `version`), packed at `precision` (a wire_precision as the frame named
  /// it); a refusal otherwise. The shard's own pull check.
  std::function<maybe_failure(uint64_t run, const std::vector<std::string>& names,
                              int32_t precision, std::vector<std::shared_ptr<const tensor>>& pinned,
                              int64_t& version)>
    pull;
  /// One connection's pushes: hand_over passes a push to the shard without
  /// waiting; await waits (at most `within`) for the answer to the oldest
  /// push handed over and not yet awaited, and gives the gradients' storage
  /// back in that push's `gradients` once the shard let go of it. A server
  /// hands over at most two before awaiting (a step's rows, then its dense
  /// gradients), so that the shard takes both at one wake-up.
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
  /// Pulls the rows of `keys` of embedding table `table` for run `run`,
  /// with the checks and counts a BASP peer's pull gets, waiting at most
  /// `within` where it waits (the shard answers on the connection's thread).
  using row_puller = std::function<bulk_rows_answer(
    uint64_t run, int32_t table, std::vector<int64_t> keys, std::chrono::milliseconds within)>;
  /// A row puller for one connection (called on its thread, once; null
  /// where the shard serves no rows on this path).
  std::function<row_puller()> open_row_puller;
  /// The most keys one request of rows may name (the shard's tables'
  /// bound; 0 before tables are configured): checked before a request's
  /// keys are read, so nothing is allocated for a larger one.
  std::function<int64_t()> max_row_keys;
};

class bulk_server {
public:
  /// Listens at once; a failure (logged by the caller) when it cannot.
  /// What `endpoint` reaches must outlive the server.
  bulk_server(bulk_endpoint endpoint, bulk_server_options options, maybe_failure& error);
  ~bulk_server();
  bulk_server(const bulk_server&) = delete;
  bulk_server& operator=(const bulk_server&) = delete;

  uint16_t port() const noexcept { return port_; }
  /// A ticket that opens one connection, whose pushes must name `worker`
  /// (-1: none may push). Thread-safe.
  uint64_t issue_ticket(int32_t worker) { return tickets_.issue(worker); }

private:
  struct connection {
    bulk::socket_fd accepted; // kept for its life: `socket` stays its number (accept_channel)
    bulk::channel ch;
    int socket = -1; // the descriptor, for shutdown from the server's thread
    std::string peer;
    std::thread thread;
    std::atomic<bool> finished{false};
    bool shares_link = false;     // it waited for a turn: its buffers are small
    int32_t worker = -1;          // whose pushes it carries (its ticket's); -1: none
    std::vector<tensor> row_keys; // a pull of rows' keys, storage kept between requests
    std::vector<tensor> row_push; // a push of rows' keys, counts and gradients, likewise
    bool request_read = false;    // the next request's head was read ahead (apply_push)
  };

  /// A push handed to the shard and not yet answered.
  struct handed_push {
    uint64_t request = 0;
    bool rows = false;
    std::unique_lock<std::mutex> turn; // a dense push's inbound turn, until the storage is back
    bulk_push push;
  };
  /// What the checks of a push's fields found.
  enum class push_check { accepted, malformed, other_worker, too_many_keys };

  void accept_loop();
  void serve(connection& conn);
  bool welcome(connection& conn);
  /// One request and its reply; false when the connection must close.
  bool answer(connection& conn, bulk::frame_reader& in, const bulk_endpoint::pusher& push,
              bulk_endpoint::row_puller& rows);
  bool answer_pull(connection& conn, bulk::frame_reader& in);
  bool answer_fetch(connection& conn, bulk::frame_reader& in);
  bool complete_request(connection& conn, bulk::frame_reader& in, const bulk::meta_reader& fields,
                        const char* what);
  /// Refuses a request whose fields or shapes are malformed; false (the
  /// connection closes: its data is never read).
  bool refuse_malformed(connection& conn, bulk::frame_reader& in, const char* what);
  bool reply_values(connection& conn, uint64_t request, const maybe_failure& refused,
                    const char* what, const bulk::tensor_refs& values, int64_t version);
  /// A push or a push of rows: applied, or refused as its check says.
  bool answer_push(connection& conn, bulk::frame_reader& in, const bulk_endpoint::pusher& push);
  bool answer_rows(connection& conn, bulk::frame_reader& in, bulk_endpoint::row_puller& rows);
  /// A push's fields and shapes (its data not read yet) into `request`.
  push_check check_push(const connection& conn, const bulk::frame_reader& in,
                        bulk_push& request) const;
  /// A push handed to the shard and answered. A push of rows followed by
  /// another push already on the connection (a step's) hands that one over
  /// too before awaiting the first.
  bool apply_push(connection& conn, bulk::frame_reader& in, bulk_push request,
                  const bulk_endpoint::pusher& push);
  /// A push's data read in this connection's inbound turn (into the storage
  /// the turns share for dense gradients, the turn then held until the
  /// shard let go of it; into the connection's own for rows) and handed over.
  bool hand_over(connection& conn, bulk::frame_reader& in, bulk_push request,
                 const bulk_endpoint::pusher& push, handed_push& out);
  /// A handed push's answer, its storage back, its reply sent.
  bool settle(connection& conn, handed_push& handed, const bulk_endpoint::pusher& push);
  /// A push naming another worker than the connection's ticket: counted,
  /// its data read and dropped, refused.
  bool refuse_other_worker(connection& conn, bulk::frame_reader& in, int32_t worker,
                           const char* what);
  /// A request of rows naming more keys than max_row_keys: refused before
  /// its keys are read (the connection closes: its data is never read).
  bool within_row_bound(connection& conn, bulk::frame_reader& in, int64_t keys);
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
  ticket_book<int32_t> tickets_; // whose pushes each ticket's connection carries
  uint16_t port_ = 0;
  bulk::socket_fd listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_; // guards connections_
  std::list<connection> connections_;
  std::thread acceptor_;
};

} // namespace troupe
