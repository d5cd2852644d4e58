#pragma once
// The chief's port, held while the chief reads its data (minutes for data
// of gigabytes) and before it can publish itself: each connection gets
// chief_lobby_greeting and is closed. A ps task whose wait for the chief's
// init runs out tries the chief's port and waits on while it gives that
// greeting (ps_shard_config::chief; a chief that runs but does not list the
// shard gives none), and a worker's connect fails fast and retries, instead
// of hanging on a port that never speaks.
#include <atomic>
#include <thread>

#include "config/node/cluster_spec.hpp"

namespace troupe::node {

class chief_lobby {
public:
  /// Listens on `address`; held() is false where it cannot (the port taken:
  /// address_is_free reports it later).
  explicit chief_lobby(const host_port& address);
  ~chief_lobby();
  chief_lobby(const chief_lobby&) = delete;
  chief_lobby& operator=(const chief_lobby&) = delete;

  /// Whether this lobby holds the port (so the address was free).
  bool held() const noexcept { return fd_ >= 0; }
  /// Frees the port for the chief to publish on; idempotent.
  void close();

private:
  void accept_until_closed();

  int fd_ = -1;
  std::atomic<bool> closing_{false};
  std::thread thread_;
};

} // namespace troupe::node
