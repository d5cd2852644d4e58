#pragma once
// What a troupe-node process sets up around its task, whatever the task:
// exit codes, logging, SIGTERM, heartbeats, the guards in front of CAF's
// sockets (connection warden, connect deadline, BASP frame limits), the
// wire limits of the model, and the end (peak memory, a shutdown that hangs).
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>

#include "actors/net/connection_warden.hpp"
#include "actors/protocol/run_end.hpp"
#include "config/node/node_config.hpp"

namespace troupe::node {

// The exit codes: run_end's values (actors/protocol/run_end.hpp), the one
// table in docs/operations.md#exit-codes.
constexpr int exit_code(run_end end) {
  return static_cast<int>(end);
}
constexpr int exit_ok = exit_code(run_end::done);
constexpr int exit_failure = exit_code(run_end::failed);
constexpr int exit_config = exit_code(run_end::config);
constexpr int exit_bad_data = exit_code(run_end::bad_data);
constexpr int exit_lost_peer = exit_code(run_end::lost_peer);
constexpr int exit_preempted = exit_code(run_end::preempted);

/// Log lines go to stderr as "[time] [who] [level] message".
void setup_logging(const std::string& who);

/// SIGTERM (a preemption, Kubernetes' normal stop) is noted for the chief,
/// which then saves a checkpoint and stops the cluster, and for a worker,
/// which leaves the run after the step under way (a scale-down). A ps task
/// keeps the default action and dies at once, which the others treat as a
/// loss.
void catch_sigterm();
bool sigterm_arrived();
/// What the handler does, for a process whose signals are another
/// runtime's (the Python package: Python's own SIGTERM handler calls it).
void note_sigterm();

/// Until `target` ends: sends it `what` (the chief: stop; a worker: leave)
/// when SIGTERM arrives (a signal handler may not send messages itself).
class sigterm_relay {
public:
  sigterm_relay(caf::actor_system& sys, caf::actor target, caf::message what);
  ~sigterm_relay();
  sigterm_relay(const sigterm_relay&) = delete;
  sigterm_relay& operator=(const sigterm_relay&) = delete;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Heartbeats make a frozen or vanished peer visible (CAF 0.17 disables
/// them by default); every node must send them, or idle peers drop each other.
void default_heartbeats(node_config& cfg);

/// How a listening task treats connections that CAF never times out.
warden_limits connection_limits(const node_config& cfg, const node_setup& setup);
/// Watches the port a task listens on, while it lives (null: not possible here, logged).
std::unique_ptr<connection_warden> guard_port(const node_setup& setup, const warden_limits& limits,
                                              const host_port& address);

/// Over plain TCP anyone who reaches a port can join: says so when the
/// cluster spans hosts.
void warn_without_tls(const node_setup& setup);
/// False (logged) when another socket listens at `address`: the task is
/// most likely running already.
bool address_is_free(const node_setup& setup, const host_port& address);

/// Bounds every tensor arriving from a peer by the model's largest
/// variable; returns the model's bytes (0: not known to this task).
uint64_t limit_tensors_to_the_model(const training_settings& train);
/// BASP frames larger than the run's largest message cost the sender its
/// connection (actors/protocol/basp_guard).
void guard_frames(const node_config& cfg, const node_setup& setup, uint64_t model_bytes);
/// One connection attempt waits at most about a second.
void bound_connects();

/// Blocks until the actor has terminated; returns its reason.
caf::error wait_for(caf::actor_system& sys, const caf::actor& actor);
int exit_code_of(const caf::error& reason);
/// The run is over and its exit code known: exit with it after 10 s even if
/// CAF's shutdown still waits for a peer that never answers.
void exit_if_shutdown_hangs(int code);
/// The process's peak resident memory (VmHWM), logged.
void log_peak_memory();

} // namespace troupe::node
