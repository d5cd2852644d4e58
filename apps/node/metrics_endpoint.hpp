#pragma once
// The HTTP port every task serves beside its cluster port (docs/operations.md#metrics):
//   GET /metrics  the process's metrics, Prometheus's text format
//   GET /healthz  200 while the process's actors answer (liveness)
//   GET /readyz   200 while every task of the process is ready, else 503
//                 naming those that are not (readiness)
// Nothing else: other paths answer 404, other methods 405, a request with a
// body or beyond a few KiB is refused, and a connection that says nothing
// is closed within a second. Under [openssl] it is mutual TLS with the
// cluster's certificates. Built on cpp-httplib; no CAF here.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/metrics/registry.hpp"

namespace troupe::node {

/// The cluster's certificates, for a metrics port under mutual TLS.
struct endpoint_tls {
  std::string certificate, key, ca_file, passphrase;
};

struct endpoint_settings {
  std::string address; ///< to bind to (a host name or numeric address)
  uint16_t port = 0;
  std::optional<endpoint_tls> tls;
  /// Whether the process's actors answer within a second (the liveness probe).
  std::function<bool()> alive;
};

class metrics_endpoint {
public:
  /// Listens at once and serves on its own threads; throws std::runtime_error
  /// naming the address when it cannot listen.
  metrics_endpoint(endpoint_settings settings, metrics::registry& source);
  ~metrics_endpoint(); ///< stops serving and joins its threads
  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  /// "http://127.0.0.1:17001/metrics"
  std::string url() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// What /readyz answers: true when every `troupe_ready` gauge is 1 (and
/// there is one), else false and the tasks that are not ready.
std::pair<bool, std::string> readiness_of(const metrics::registry& source);

} // namespace troupe::node
