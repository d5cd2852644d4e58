#pragma once
// A TCP server's frame, for the bulk path and the report channel alike: a
// listening socket, the thread that accepts on it, and each connection
// served on a thread of its own, at most max_connections at once. Stopped
// (or destroyed), it stops accepting, closes every connection and joins
// every thread before it returns. Free of CAF.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include "actors/net/socket.hpp"

namespace troupe::bulk {

/// What every served connection holds; a server's own connection type
/// derives from it.
struct served_connection {
  socket_fd accepted; ///< kept for its life: `socket` stays its number (accept_channel)
  int socket = -1;    ///< the descriptor, for shutdown from other threads
  std::string peer;   ///< "host:port", for log lines
  std::thread thread;
  std::atomic<bool> finished{false};
};

template <class Conn>
class connection_server {
public:
  using conn_ptr = std::shared_ptr<Conn>;
  /// A new connection, under the server's lock, beside those open: it gets
  /// what it needs before its thread starts.
  using admit_fn = std::function<void(Conn& fresh, const std::vector<conn_ptr>& open)>;
  /// Serves one connection on its thread, until it returns.
  using serve_fn = std::function<void(const conn_ptr&)>;
  /// A connection beyond max_connections, closed: its peer, how many are open.
  using refuse_fn = std::function<void(const std::string& peer, size_t open)>;

  /// Listens at once on host:port (0: a free port); `error` set when it cannot.
  connection_server(const std::string& host, uint16_t port, size_t max_connections,
                    maybe_failure& error)
    : port_(port), max_connections_(max_connections) {
    listener_ = listen_on(host, port_, error);
  }
  ~connection_server() { stop(); }
  connection_server(const connection_server&) = delete;
  connection_server& operator=(const connection_server&) = delete;

  /// Starts accepting (once it listens).
  void start(admit_fn admit, serve_fn serve, refuse_fn refuse) {
    if (!listener_)
      return;
    admit_ = std::move(admit);
    serve_ = std::move(serve);
    refuse_ = std::move(refuse);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  /// Stops accepting, closes every connection and joins every thread;
  /// called by the owner before what its threads use goes away.
  void stop() {
    stopping_ = true;
    if (listener_)
      ::shutdown(listener_.get(), SHUT_RDWR);
    if (acceptor_.joinable())
      acceptor_.join();
    std::vector<conn_ptr> open;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      open.swap(connections_);
    }
    for (auto& conn : open)
      ::shutdown(conn->socket, SHUT_RDWR);
    for (auto& conn : open)
      if (conn->thread.joinable())
        conn->thread.join();
  }

  uint16_t port() const noexcept { return port_; }
  bool stopping() const noexcept { return stopping_; }

  /// The first live connection `pick` chooses, or null.
  template <class Pick>
  conn_ptr find(Pick pick) const {
    std::lock_guard<std::mutex> guard{mutex_};
    for (auto& conn : connections_)
      if (!conn->finished && pick(*conn))
        return conn;
    return nullptr;
  }

  /// Calls `visit` on every live connection, under the lock.
  template <class Visit>
  void for_each(Visit visit) const {
    std::lock_guard<std::mutex> guard{mutex_};
    for (auto& conn : connections_)
      if (!conn->finished)
        visit(*conn);
  }

  /// Calls `use` with every connection accepted and not yet forgotten
  /// (finished ones among them), under the lock: a change that must see
  /// the others and be seen by them at once.
  template <class Use>
  void locked(Use use) const {
    std::lock_guard<std::mutex> guard{mutex_};
    use(connections_);
  }

private:
  void accept_loop() {
    while (!stopping_) {
      auto fd = accept_next(listener_, std::chrono::seconds(1));
      if (!fd || stopping_)
        continue;
      std::lock_guard<std::mutex> guard{mutex_};
      reap_finished();
      auto peer = peer_name(fd.get());
      if (connections_.size() >= max_connections_) {
        refuse_(peer, connections_.size());
        continue;
      }
      auto conn = std::make_shared<Conn>();
      conn->socket = fd.get();
      conn->accepted = std::move(fd);
      conn->peer = std::move(peer);
      if (admit_)
        admit_(*conn, connections_);
      connections_.push_back(conn);
      conn->thread = std::thread([this, conn] {
        serve_(conn);
        ::shutdown(conn->socket, SHUT_RDWR);
        conn->finished = true;
      });
    }
  }

  // Joins the threads of connections that finished (their last step: a
  // finished thread takes no lock) and forgets them. Under the lock.
  void reap_finished() {
    auto done = std::stable_partition(connections_.begin(), connections_.end(),
                                      [](const conn_ptr& c) { return !c->finished; });
    for (auto it = done; it != connections_.end(); ++it)
      (*it)->thread.join();
    connections_.erase(done, connections_.end());
  }

  uint16_t port_;
  size_t max_connections_;
  socket_fd listener_;
  std::atomic<bool> stopping_{false};
  admit_fn admit_;
  serve_fn serve_;
  refuse_fn refuse_;
  mutable std::mutex mutex_; // guards connections_
  std::vector<conn_ptr> connections_;
  std::thread acceptor_;
};

} // namespace troupe::bulk
