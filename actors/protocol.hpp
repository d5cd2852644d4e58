#pragma once
// The Troupe wire protocol, written down once: every atom, message type and
// typed actor interface. docs/protocol.md mirrors this file; change both.
//
// Roles: ps_shard (holds variables), chief (initialises, owns global_step,
// grants steps, stops), worker (pull -> compute -> push -> report).
#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/errors.hpp"
#include "actors/wire.hpp"
#include "tensor/tensor.hpp"

namespace troupe {

/// Bumped on every incompatible change; peers of another version are refused.
constexpr uint32_t protocol_version = 1;

// -- atoms (at most 10 characters) -------------------------------------------

using hello_atom = caf::atom_constant<caf::atom("hello")>;   ///< version handshake
using init_atom = caf::atom_constant<caf::atom("init")>;     ///< chief -> shard: first values
using pull_atom = caf::atom_constant<caf::atom("pull")>;     ///< read variables
using push_atom = caf::atom_constant<caf::atom("push")>;     ///< apply gradients
using ready_atom = caf::atom_constant<caf::atom("ready")>;   ///< worker -> chief: wait for init
using report_atom = caf::atom_constant<caf::atom("report")>; ///< worker -> chief: step done
using stop_atom = caf::atom_constant<caf::atom("stop")>;     ///< chief -> all: shut down
using run_atom = caf::atom_constant<caf::atom("run")>;       ///< worker -> itself: next step
using tick_atom = caf::atom_constant<caf::atom("tick")>;     ///< chief -> itself: watchdog

// -- message types -----------------------------------------------------------

/// A shard's answer to a pull: the values in the order asked, and the number
/// of updates the shard has applied so far (its version).
struct pull_reply {
  int64_t version = 0;
  std::vector<tensor> values;
};

/// What the chief tells a ready worker: the variables in model order and the
/// shard index each one lives on.
struct training_plan {
  std::vector<std::string> variables;
  std::vector<int32_t> shard_of;
};

/// A worker's account of one step. step < 0 means "no step yet" (the first
/// report of a worker only asks for a grant). applied = false means the
/// update was not applied: the worker found a non-finite gradient and pushed
/// nothing, or a shard refused its part.
struct step_report {
  int32_t worker = 0;
  int64_t step = -1;
  bool applied = false;
  double loss = 0;
  uint64_t correct = 0;
  uint64_t examples = 0;
};

/// The chief's answer to a report: compute global step `step` next, or stop.
struct step_grant {
  int64_t step = 0;
  bool stop = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_reply& x) {
  return f(caf::meta::type_name("pull_reply"), x.version, x.values);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, training_plan& x) {
  return f(caf::meta::type_name("training_plan"), x.variables, x.shard_of);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.worker, x.step, x.applied, x.loss,
           x.correct, x.examples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_grant& x) {
  return f(caf::meta::type_name("step_grant"), x.step, x.stop);
}

// -- typed actor interfaces --------------------------------------------------

/// Handshake, shared by every published actor: (version, job, task) -> own
/// version; another version is answered with errc::protocol_mismatch. Only
/// built-in types, so that it decodes whatever the peer's version.
using hello_handler = caf::replies_to<hello_atom, uint32_t, std::string, int32_t>::with<
  uint32_t>;

/// A parameter-server shard.
using ps_shard_actor = caf::typed_actor<
  hello_handler,
  // first values, exactly once: (names, values) -> ok
  caf::replies_to<init_atom, std::vector<std::string>, std::vector<tensor>>::with<
    caf::ok_atom>,
  // read: names -> values + version
  caf::replies_to<pull_atom, std::vector<std::string>>::with<pull_reply>,
  // update: (global step, names, gradients) -> new version
  caf::replies_to<push_atom, int64_t, std::vector<std::string>, std::vector<tensor>>::with<
    int64_t>,
  // chief: training is over, quit
  caf::reacts_to<stop_atom>,
  // internal: the deadline for the chief's init (a chief that never comes)
  caf::reacts_to<tick_atom>>;

/// The chief (supervisor).
using chief_actor = caf::typed_actor<
  hello_handler,
  // worker index -> plan, answered once the variables are initialised
  caf::replies_to<ready_atom, int32_t>::with<training_plan>,
  // a step's outcome -> the next grant or stop
  caf::replies_to<report_atom, step_report>::with<step_grant>,
  // internal: periodic watchdog (fails the run when no worker is left)
  caf::reacts_to<tick_atom>>;

/// A worker.
using worker_actor = caf::typed_actor<hello_handler, caf::reacts_to<run_atom>,
                                      caf::reacts_to<stop_atom>>;

/// Registers every message type and error category; call on every node's
/// config before creating the actor system.
void register_protocol(caf::actor_system_config& cfg);

/// A caf::error from a failure (category "troupe").
caf::error make_error(const failure& f);

/// One line for logs: "unknown_variable: no variable 'x' on ps:0" for our
/// errors, CAF's rendering for the rest.
std::string describe(const caf::error& err);

/// The reply to a hello: the own version, or protocol_mismatch.
caf::result<uint32_t> answer_hello(uint32_t peer_version, const std::string& peer_job,
                                   int32_t peer_task, const std::string& self_name);

} // namespace troupe

CAF_ERROR_CODE_ENUM_2(troupe::errc, "troupe")
