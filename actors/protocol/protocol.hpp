#pragma once
// The Troupe wire protocol, written down once: the plain messages
// (messages.hpp) and how they cross the wire (wire.hpp), the atoms
// (atoms.hpp), and each role's typed interface with who may send it what
// (worker_protocol.hpp, token_queue_protocol.hpp, shard_protocol.hpp,
// chief_protocol.hpp). docs/protocol.md mirrors these files (a test compares
// the version); change both.
//
// Roles: ps_shard (holds variables), chief (initialises, owns global_step,
// grants steps in async mode, stops), worker (pull -> compute -> push ->
// report), token_queue (sync mode: releases workers after each update).
// Each actor's interface has two parts: the published one (`*_actor`,
// here), the messages other actors may send it, and the one it is
// implemented with (`*_impl`, in the actor's own header), which adds the
// messages it sends only to itself (timers). Peers only ever hold the
// published handle.
#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include "actors/protocol/chief_protocol.hpp"
#include "actors/protocol/run_end.hpp"
#include "actors/protocol/shard_protocol.hpp"
#include "tensor/core/error.hpp"

namespace troupe {

/// Bumped on every incompatible change; peers of another version are refused.
constexpr uint32_t protocol_version = 17;

// -- registration ---------------------------------------------------------------

/// Every type that crosses the wire and is not one of CAF's own, with the
/// name it is registered under: the one list register_protocol reads (a test
/// checks that every type in every published interface is registered).
#define TROUPE_MESSAGE_TYPES(X)                                                                    \
  X(tensor)                                                                                        \
  X(std::vector<tensor>)                                                                           \
  X(pull_reply)                                                                                    \
  X(planned_slice)                                                                                 \
  X(std::vector<planned_slice>)                                                                    \
  X(training_plan)                                                                                 \
  X(step_report)                                                                                   \
  X(step_grant)                                                                                    \
  X(step_summary)                                                                                  \
  X(variable_traffic)                                                                              \
  X(std::vector<variable_traffic>)                                                                 \
  X(shard_traffic)                                                                                 \
  X(shard_options)                                                                                 \
  X(snapshot_index)                                                                                \
  X(step_coordinator_actor)                                                                        \
  X(token_queue_actor)                                                                             \
  X(ps_shard_actor)                                                                                \
  X(checkpoint_listing)                                                                            \
  X(checkpoint_source_actor)                                                                       \
  X(chief_actor)                                                                                   \
  X(worker_actor)                                                                                  \
  X(table_setup)                                                                                   \
  X(std::vector<table_setup>)                                                                      \
  X(restored_rows)                                                                                 \
  X(table_report)                                                                                  \
  X(std::vector<table_report>)                                                                     \
  X(std::vector<step_report>)                                                                      \
  X(std::vector<step_grant>)                                                                       \
  X(checkpoint_chunk)                                                                              \
  X(pull_request)                                                                                  \
  X(step_push)                                                                                     \
  X(push_receipt)                                                                                  \
  X(model_declaration)                                                                             \
  X(reported_metrics)

/// Registers every message type and the error category; call on every
/// node's config before creating the actor system.
void register_protocol(caf::actor_system_config& cfg);

/// A caf::error from a failure (category "troupe").
caf::error make_error(const failure& f);

/// The reason an actor ends with when its part of the run ended as `end`
/// (done: a normal exit), `why` naming the cause.
caf::error end_error(run_end end, const std::string& why);
/// How an actor's part ended, from its exit reason: a normal exit is done,
/// an end_error its run_end, anything else failed.
run_end end_of(const caf::error& reason);

/// The peer's refusal carried by an error of category "troupe" (its code
/// and message); none for an error that is no answer (the peer is gone, the
/// request timed out).
maybe_failure refusal_of(const caf::error& err);

/// One line for logs: "unknown_variable: no variable 'x' on ps:0" for our
/// errors, CAF's rendering for the rest.
std::string describe(const caf::error& err);

/// "actor 12 on node 5F3A...#4711" (or "an anonymous sender"): who sent the
/// message being handled, for the log line of a refusal. CAF 0.17 gives
/// actors the peer's node id, not its IP address.
std::string describe_sender(const caf::strong_actor_ptr& sender);

/// Refuses a message from the wrong party: logs "<who>: refused <what> from
/// <sender>[ at host:port]: <why>" (the address, asked of the middleman, for
/// a remote sender) and returns the unauthorized error to answer with.
caf::error refuse(const std::string& who, const std::string& what,
                  const caf::strong_actor_ptr& sender, const std::string& why);

/// The reply to a hello: the own version, or protocol_mismatch.
caf::result<uint32_t> answer_hello(uint32_t peer_version, const std::string& peer_job,
                                   int32_t peer_task, const std::string& self_name);

} // namespace troupe

CAF_ERROR_CODE_ENUM_2(troupe::errc, "troupe")
