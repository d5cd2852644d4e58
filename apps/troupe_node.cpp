// troupe-node: one binary for every task. With --job_name/--task_index it runs
// one task of the cluster in caf-application.conf; without, every task in
// this process (the embedded default when there is no config file either).
// Exit codes: run_end's (docs/operations.md#exit-codes): 0 done, 1 failed,
// 2 configuration, 3 data, 4 diverged, 5 lost peer, 6 preempted.
// What it does lives in apps/node/ (process set-up, peers, the roles, what
// a run leaves behind), where the tests can reach it.
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>

#include <caf/actor_system.hpp>
#include <spdlog/spdlog.h>

#include "actors/net/openssl_error_queue.hpp"
#include "actors/protocol/protocol.hpp"
#include "apps/node/evaluator_job.hpp"
#include "apps/node/peers.hpp"
#include "apps/node/process.hpp"
#include "apps/node/roles.hpp"
#include "apps/node/task_endpoint.hpp"
#include "config/node/node_config.hpp"
#include "gpu/backend.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/memory_policy.hpp"

using namespace troupe;
using namespace troupe::node;

namespace {

// Help, a configuration error or a config dump end the process here (its
// exit code); a run goes on (none).
std::optional<int> answer_without_running(const load_outcome& outcome, node_config& cfg) {
  switch (outcome.what) {
    case load_outcome::action::help:
      std::cout << help_text(cfg);
      return exit_ok;
    case load_outcome::action::fail: {
      int code = outcome.setup.data_unreadable ? exit_bad_data : exit_config;
      for (auto& e : outcome.errors)
        std::cerr << "troupe-node: configuration error: " << e << "\n";
      std::cerr << "troupe-node: nothing was started (exit code " << code
                << "); see troupe-node --help\n";
      return code;
    }
    case load_outcome::action::dump_config:
      std::cout << dump_config(cfg, outcome.setup);
      return exit_ok;
    case load_outcome::action::run:
      break;
  }
  return std::nullopt;
}

// A worker that cannot use its device stops here, before it joins.
bool devices_usable(const node_setup& setup) {
  for (int32_t w = 0; w < static_cast<int32_t>(setup.cluster.worker.size()); ++w) {
    if (!setup.whole_cluster && !(setup.job == job_kind::worker && setup.task == w))
      continue;
    try {
      gpu::check_device(device_of(setup.train, w), {setup.train.gpu_memory_fraction});
    } catch (const std::exception& e) {
      std::cerr << "troupe-node: device error: worker:" << w << ": " << e.what() << "\n"
                << "troupe-node: nothing was started (exit code 2)\n";
      return false;
    }
  }
  return true;
}

// Mutual TLS needs CAF's OpenSSL calls to go through the error-queue fix
// (actors/net/openssl_error_queue.hpp), or one stranger's failed handshake
// can drop a healthy connection.
bool tls_safe(const node_setup& setup) {
  if (!setup.tls)
    return true;
  auto problem = openssl_error_queue_problem();
  if (problem.empty())
    return true;
  std::cerr << "troupe-node: configuration error: TLS is not safe in this executable: " << problem
            << "\ntroupe-node: nothing was started (exit code 2)\n";
  return false;
}

int run_evaluator_task(node_config& cfg, const node_setup& setup, uint64_t model_bytes) {
  try {
    caf::actor_system sys{cfg};
    task_endpoint endpoint{sys, cfg, setup};
    auto code = run_evaluator(sys, setup, model_bytes, reconnect_to_peers(sys, setup).chief);
    log_peak_memory();
    return code;
  } catch (const std::exception& e) {
    spdlog::error("evaluator: {}", e.what());
    return exit_failure;
  }
}

int run_task(node_config& cfg, const node_setup& setup, const warden_limits& limits,
             chief_lobby* lobby) {
  auto bulk = bulk_path_of(cfg, setup);
  if (!bulk)
    return exit_failure;
  try {
    caf::actor_system sys{cfg};
    task_endpoint endpoint{sys, cfg, setup};
    int code = setup.whole_cluster            ? run_whole_cluster(sys, setup)
               : setup.job == job_kind::ps    ? run_ps(sys, setup, limits, *bulk)
               : setup.job == job_kind::chief ? run_chief(sys, setup, limits, *bulk, lobby)
                                              : run_worker(sys, setup, *bulk);
    log_peak_memory();
    exit_if_shutdown_hangs(code);
    return code; // the actor system shuts down here
  } catch (const data_error& e) {
    spdlog::error("data: {}", e.what());
    return exit_bad_data;
  } catch (const std::exception& e) {
    spdlog::error("fatal: {}", e.what());
    return exit_failure;
  }
}

} // namespace

int main(int argc, char** argv) {
  // A closed stdout or stderr must not end a run (see print_final).
  std::signal(SIGPIPE, SIG_IGN);
  keep_freed_tensor_memory();
  node_config cfg;
  register_protocol(cfg);
  // A chief holds its port while it reads its data, so that its shards and
  // workers see it alive (chief_lobby.hpp).
  std::unique_ptr<chief_lobby> lobby;
  auto outcome = load_node_config(cfg, argc, argv, [&lobby](const node_setup& s) {
    if (!s.whole_cluster && s.job == job_kind::chief && !s.cluster.chief.empty())
      lobby = std::make_unique<chief_lobby>(s.cluster.chief[0]);
  });
  if (auto code = answer_without_running(outcome, cfg))
    return *code;
  auto& setup = outcome.setup;
  if (!devices_usable(setup) || !tls_safe(setup))
    return exit_config;
  setup_logging(setup.name());
  if (setup.whole_cluster || setup.job == job_kind::chief || setup.job == job_kind::worker
      || setup.job == job_kind::ps)
    catch_sigterm();
  for (auto& warning : setup.restore_warnings)
    spdlog::warn("checkpoint: {}", warning);
  for (auto& note : setup.restore_notes)
    spdlog::info("checkpoint: {}", note);
  warn_without_tls(setup);
  default_heartbeats(cfg);
  auto limits = connection_limits(cfg, setup);
  bound_connects();
  auto model_bytes = limit_tensors_to_the_model(setup.train);
  guard_frames(cfg, setup, model_bytes);
  if (!setup.whole_cluster && setup.job == job_kind::evaluator)
    return run_evaluator_task(cfg, setup, model_bytes);
  return run_task(cfg, setup, limits, lobby.get());
}
