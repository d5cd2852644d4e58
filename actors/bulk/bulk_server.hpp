#pragma once
// The shard side of the bulk path (docs/protocol.md, "Bulk path"): a
// listening socket beside the shard's published BASP port and one thread
// per connection. A push is read straight into tensors and handed to the
// shard as the same push message a BASP peer sends (in process, so nothing
// is serialised): the shard's checks and counts apply. A pull is answered
// by the connection's thread itself from the shard's store (pinned values,
// copy-on-write), written straight from them: no hop through the shard
// actor, so a small pull costs about a TCP round trip. A connection must
// open with a ticket the shard gave a peer of its run over BASP
// (bulk_atom): each ticket opens one connection, for the worker it was
// asked for (its pushes must name that worker; -1: pulls only), and
// expires unused after a minute; anything else is refused and closed. The
// shard owns its server: destroying it closes every connection and joins
// their threads.
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

#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include "actors/bulk/socket.hpp"
#include "actors/ps/traffic_counter.hpp"
#include "actors/ps/variable_store.hpp"

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

class bulk_server {
public:
  /// Listens at once; a failure (logged by the caller) when it cannot.
  /// `store` and `traffic` are the shard's, and must outlive the server.
  bulk_server(caf::actor_system& sys, caf::actor_addr shard, const variable_store& store,
              traffic_counter& traffic, bulk_server_options options, maybe_failure& error);
  ~bulk_server();
  bulk_server(const bulk_server&) = delete;
  bulk_server& operator=(const bulk_server&) = delete;

  uint16_t port() const noexcept { return port_; }
  /// A ticket that opens one connection, whose pushes must name `worker`
  /// (-1: none may push). Thread-safe.
  uint64_t issue_ticket(int32_t worker);

private:
  struct connection {
    bulk::socket_fd accepted; // until the connection's thread makes it a channel
    bulk::channel ch;
    int socket = -1; // the descriptor, for shutdown from the server's thread
    std::string peer;
    std::thread thread;
    std::atomic<bool> finished{false};
    bool shares_link = false; // it waited for a turn: its buffers are small
    int32_t worker = -1;      // whose pushes it carries (its ticket's); -1: none
  };
  struct ticket_entry {
    int32_t worker = -1;
    std::chrono::steady_clock::time_point issued;
  };
  /// Takes a ticket out of the book: the worker it opens a connection for.
  std::optional<int32_t> redeem(uint64_t ticket);

  void accept_loop();
  void serve(connection& conn);
  bool welcome(connection& conn);
  /// One request and its reply; false when the connection must close.
  bool answer(connection& conn, bulk::frame_reader& in, caf::scoped_actor& self);
  bool answer_pull(connection& conn, bulk::frame_reader& in);
  bool answer_push(connection& conn, bulk::frame_reader& in, caf::scoped_actor& self);
  bool reply(connection& conn, bulk::frame_writer out);
  std::unique_lock<std::mutex> take_turn(connection& conn, std::mutex& direction);

  caf::actor_system& sys_;
  caf::actor_addr shard_;
  const variable_store& store_;
  traffic_counter& traffic_;
  bulk_server_options options_;
  // One push is read and one pull written at a time (turns in each
  // direction): a shard's link carries one transfer per direction at full
  // speed instead of several at a fraction, and the shard holds one pushed
  // gradient at a time, in storage the turns share.
  std::mutex inbound_;
  std::vector<tensor> push_storage_; // guarded by inbound_
  std::mutex outbound_;
  std::mutex tickets_mutex_;
  std::map<uint64_t, ticket_entry> tickets_; // issued, not yet shown
  uint16_t port_ = 0;
  bulk::socket_fd listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_; // guards connections_
  std::list<connection> connections_;
  std::thread acceptor_;
};

} // namespace troupe
