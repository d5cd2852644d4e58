#pragma once
// What a peer's BASP frame may make this process do, decided before CAF
// decodes it. CAF 0.17 decodes whatever type a frame names, its own
// included, and some of its own throw on bad bytes (a variant index out of
// range in @config_value, @downstream_msg, ...): on a BASP worker thread the
// exception ends the process, in the broker it ends the broker (the port
// goes deaf). It also allocates a frame's announced payload (up to 4 GiB)
// as soon as the 32-byte header arrives. None of this can be configured, so
// the guard interposes three CAF functions in the process (as the
// connection warden does accept()), each forwarding to CAF's own:
// - basp::instance::handle (the broker, per header and per payload): a
//   header announcing more than the limits allow, or a message whose stages
//   are not empty, whose top-level types are not on the allow-list, that is
//   an error answering no request (an actor would quit on it) or a link
//   request (CAF would cast a local actor to a proxy), costs its sender the
//   connection (CAF closes it as a malformed frame); a large receive buffer
//   is given back after its payload;
// - message::load (wherever a message is decoded, nested ones included):
//   names off the allow-list and nesting beyond a few levels are refused,
//   and any exception CAF's decoders throw is caught. CAF ignores the error
//   a nested decoder returns, so a refused message arrives empty (an
//   actor's "unexpected message"), never partly decoded; the node goes on;
// - basp_broker::connection_cleanup: a closed connection's announced bytes
//   leave the budget.
// The allow-list is every type Troupe registers (TROUPE_MESSAGE_TYPES) and
// the built-in types its messages and CAF's replies use: not exit or down
// messages, which never cross the wire in a Troupe cluster. Off until
// guard_basp() is called (troupe-node calls it).
#include <cstdint>
#include <string>
#include <vector>

namespace caf {
class actor_system_config;
class execution_unit;
} // namespace caf

namespace troupe {

struct basp_limits {
  /// The largest payload one frame may announce.
  uint64_t max_message_bytes = uint64_t{1} << 30;
  /// Announced payloads not yet received, over every connection.
  uint64_t max_pending_bytes = uint64_t{2} << 30;
  /// Frames other than messages (handshakes, monitor and down notices).
  uint64_t max_control_bytes = uint64_t{1} << 20;
};

/// Turns the guard on, with these limits and the type names `cfg` gives
/// Troupe's types (register_protocol first). Call before the actor system
/// is made.
void guard_basp(const caf::actor_system_config& cfg, const basp_limits& limits);

/// Empty when CAF's calls go through the guard; otherwise why not.
std::string basp_guard_problem();

/// Whether a message may name this type (Troupe's registered names and the
/// built-ins its traffic uses); nothing is allowed before guard_basp.
bool basp_type_allowed(const std::string& name);

/// CAF's own type names (`@config_value`, `@str`, ...), for the sweeps.
const std::vector<std::string>& caf_builtin_type_names();

/// What the guard refused since the process started.
struct basp_refusals {
  uint64_t frames = 0;   ///< connections closed for a frame (size, types, stages)
  uint64_t messages = 0; ///< messages dropped while decoding (nested types, exceptions)
};
basp_refusals basp_guard_refusals();

/// The guard's verdict on the payload of a direct (routed = false) or
/// routed BASP message, as the broker sees it (`response`: its message id
/// answers a request): empty to let CAF decode it, otherwise why not.
/// Exposed for the tests and the messages fuzz target.
std::string judge_basp_message(caf::execution_unit* context, bool routed, bool response,
                               const char* payload, size_t size);

} // namespace troupe
