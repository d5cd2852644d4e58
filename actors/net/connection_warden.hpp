#pragma once
// Connections a node accepted but CAF never times out. CAF 0.17 closes a
// connection only when the peer behind it is a BASP node that went silent
// (middleman.connection-timeout); a connection that never completes a
// handshake (a port scanner, a stranger holding sockets open) stays forever,
// and enough of them exhaust the file descriptors, after which CAF's accept
// loop spins on EMFILE at 100% of a core. The warden closes such connections
// after a timeout and bounds how many a node holds, from outside CAF:
// - accept() is interposed (as openssl_error_queue.cpp does for libssl):
//   over the limit, a new connection on the watched port is closed at once
//   and CAF sees "would block";
// - a thread sweeps the process's sockets on that port (/proc/self/fd,
//   TCP_INFO's time since the last data received) and shuts down the idle
//   ones; CAF then sees end-of-stream and closes them itself.
// A cluster peer sends a heartbeat every middleman.heartbeat-interval, so it
// is never idle for long; the idle timeout is twice the connection timeout,
// past which CAF would have dropped a silent peer anyway.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

/// One connection accepted on the watched port.
struct accepted_connection {
  int fd = -1;
  std::chrono::milliseconds idle{0}; ///< since the last data received
  bool from_cluster_host = false;    ///< its address is one of the cluster's hosts
  std::string peer;                  ///< host:port, for the log
};

struct warden_limits {
  std::chrono::milliseconds idle_timeout{20000};
  size_t max_connections = 1024;
};

/// Which connections to close (indices into the sweep), and why.
struct warden_verdict {
  std::vector<size_t> idle;       ///< silent for idle_timeout or longer
  std::vector<size_t> over_limit; ///< beyond max_connections
};

/// Pure policy: every connection idle for the timeout goes; of the rest,
/// those beyond the limit go, strangers' addresses first, then the longest
/// idle, so that the cluster's own peers (talking every heartbeat) stay.
warden_verdict judge_connections(const std::vector<accepted_connection>& connections,
                                 const warden_limits& limits);

/// The connections this process accepted on `port` (TCP, IPv4 or IPv6).
/// `cluster_addresses` are numeric host addresses ("10.0.0.3").
std::vector<accepted_connection>
accepted_connections_on(uint16_t port, const std::vector<std::string>& cluster_addresses);

/// The numeric addresses `hosts` resolve to now (unresolvable ones are left out).
std::vector<std::string> resolve_hosts(const std::vector<std::string>& hosts);

/// Empty when accept() goes through the warden's interposer; otherwise why not.
std::string connection_warden_problem();

/// Watches one listening port while it lives: limits new connections at
/// accept and sweeps idle ones every `sweep_interval`. One per process.
class connection_warden {
public:
  connection_warden(uint16_t port, warden_limits limits, std::vector<std::string> cluster_hosts,
                    std::chrono::milliseconds sweep_interval = std::chrono::milliseconds(250));
  ~connection_warden();
  connection_warden(const connection_warden&) = delete;
  connection_warden& operator=(const connection_warden&) = delete;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
