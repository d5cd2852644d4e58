#pragma once
// troupe-serve's HTTP port (docs/online.md#troupe-serve), on cpp-httplib:
//   POST /v1/predict   {"rows": [...]} -> {"version", "step", "scores"}
//   GET  /v1/version   the version served, the newest on disk, pinned or not
//   POST /v1/rollback?version=V   serve V and stay there
//   POST /v1/follow    move forward again with new deltas
//   GET  /healthz      200 while the server answers
//   GET  /readyz       200 once a model is loaded, else 503
//   GET  /metrics      Prometheus text: requests, latency, version, rows
// Every answer carries the version in X-Troupe-Version. A bad request gets
// a 4xx naming what is wrong: a body that is not JSON or not rows of the
// model (400), a body past the limit (413, unread), another path (404) or
// method (405); a connection that says nothing is closed after the read
// timeout, newest connections first. No CAF.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/metrics/registry.hpp"
#include "apps/serve/model_versions.hpp"

namespace troupe::serve {

struct serve_settings {
  std::string address = "127.0.0.1";
  uint16_t port = 8500; ///< 0: any free port (port() says which)
  size_t threads = 4;
  size_t max_body = size_t{64} << 20;
  std::chrono::seconds read_timeout{5};
};

class serve_endpoint {
public:
  /// Listens at once and serves on its own threads; throws
  /// std::runtime_error naming the address when it cannot listen.
  serve_endpoint(serve_settings settings, model_versions& versions, metrics::registry& registry);
  ~serve_endpoint(); ///< stops serving and joins its threads
  serve_endpoint(const serve_endpoint&) = delete;
  serve_endpoint& operator=(const serve_endpoint&) = delete;

  uint16_t port() const;
  /// "http://127.0.0.1:8500"
  std::string url() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::serve
