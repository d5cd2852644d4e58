#include "apps/node/task_endpoint.hpp"

#include <chrono>
#include <exception>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/metrics/task_metrics.hpp"
#include "apps/node/metrics_endpoint.hpp"

namespace troupe::node {

namespace {

constexpr auto liveness_timeout = std::chrono::seconds(1);

caf::behavior echo() {
  return {[](int32_t x) { return x; }};
}

} // namespace

struct task_endpoint::impl {
  caf::actor_system& sys;
  caf::actor echo;
  std::unique_ptr<metrics_endpoint> endpoint;
};

task_endpoint::task_endpoint(caf::actor_system& sys, const node_config& cfg,
                             const node_setup& setup)
  : impl_(std::make_unique<impl>(impl{sys, {}, {}})) {
  if (!setup.metrics) {
    if (!setup.metrics_note.empty())
      spdlog::warn("{}", setup.metrics_note);
    return;
  }
  metrics::add_process_metrics();
  impl_->echo = sys.spawn(echo);
  endpoint_settings s;
  s.address = setup.metrics->host;
  s.port = setup.metrics->port;
  if (setup.metrics_tls)
    s.tls = endpoint_tls{cfg.openssl_certificate, cfg.openssl_key, cfg.openssl_cafile,
                         cfg.openssl_passphrase};
  s.alive = [this] {
    caf::scoped_actor self{impl_->sys};
    bool answered = false;
    self->request(impl_->echo, liveness_timeout, int32_t{1})
      .receive([&](int32_t) { answered = true; }, [](const caf::error&) {});
    return answered;
  };
  try {
    impl_->endpoint = std::make_unique<metrics_endpoint>(std::move(s), metrics::process_registry());
    spdlog::info("metrics at {} (and /healthz, /readyz)", impl_->endpoint->url());
  } catch (const std::exception& e) {
    spdlog::error("metrics: {}; this task serves no metrics and no probes", e.what());
  }
}

task_endpoint::~task_endpoint() {
  impl_->endpoint.reset(); // before the actor its probe asks
  if (impl_->echo)
    caf::anon_send_exit(impl_->echo, caf::exit_reason::user_shutdown);
}

} // namespace troupe::node
