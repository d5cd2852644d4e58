#include "actors/protocol/basp_guard.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <typeindex>
#include <unordered_map>
#include <unordered_set>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/instance.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/system_messages.hpp>
#include <caf/message.hpp>
#include <caf/node_id.hpp>
#include <caf/sec.hpp>
#include <caf/type_id.hpp>
#include <caf/type_nr.hpp>
#include <spdlog/spdlog.h>

#include "actors/protocol/protocol.hpp"

namespace {

using caf::io::basp::connection_state;

std::atomic<bool> guard_on{false};
std::mutex limits_mutex;
troupe::basp_limits limits;
std::atomic<uint64_t> refused_frames{0};
std::atomic<uint64_t> dropped_messages{0};

// A message inside a message (an error's context, an exit's reason) is
// legitimate; a tower of them only costs stack.
constexpr int max_nesting = 4;
thread_local int nesting = 0;

// Announced payloads not yet received, by connection (the broker's thread
// adds and removes; the mutex is for the limits' writer and the tests).
std::unordered_map<int64_t, uint64_t> pending_by_connection;
uint64_t pending_total = 0;

// A receive buffer above this is given back after its payload: CAF would
// keep it for the connection's life.
constexpr size_t kept_buffer_bytes = size_t{1} << 20;

// Where CAF's own definition of an interposed function lives.
void* next_definition(const char* mangled) {
  void* found = dlsym(RTLD_NEXT, mangled);
  if (found == nullptr)
    throw std::runtime_error(std::string("basp guard: CAF's ") + mangled + " not found");
  return found;
}

// An Itanium member-function pointer to the code at `address`.
template <class MemberFn>
MemberFn member_at(void* address) {
  struct {
    void* code;
    std::ptrdiff_t adjust;
  } raw{address, 0};
  static_assert(sizeof(MemberFn) == sizeof(raw), "Itanium member pointers are two words");
  MemberFn fn;
  std::memcpy(&fn, &raw, sizeof(fn));
  return fn;
}

constexpr const char* handle_symbol =
  "_ZN3caf2io4basp8instance6handleEPNS_14execution_unitERNS0_12new_data_msgERNS1_6headerEb";
constexpr const char* load_symbol = "_ZN3caf7message4loadERNS_12deserializerE";
constexpr const char* cleanup_symbol =
  "_ZN3caf2io11basp_broker18connection_cleanupENS0_17connection_handleENS_3secE";

// Built-in types a Troupe message or CAF's replies (ok, errors) use.
// Everything else CAF knows (@config_value, @group, @downstream_msg,
// @message, ...) is refused: Troupe never sends it, and several of its
// decoders throw or act (joining groups) on what they read. Exit and down
// messages never cross the wire in a Troupe cluster (no actor links across
// nodes; remote monitors are BASP's own frames), and an actor takes one as
// its peer's death: exit_reason::kill ends it whatever its exit handler says.
const char* const allowed_builtins[] = {"@atom",
                                        "@str",
                                        "@strvec",
                                        "@i8",
                                        "@i16",
                                        "@i32",
                                        "@i64",
                                        "@u8",
                                        "@u16",
                                        "@u32",
                                        "@u64",
                                        "bool",
                                        "float",
                                        "double",
                                        "@error",
                                        "@unit",
                                        "@strong_actor_ptr",
                                        "@actor",
                                        "@addr",
                                        "@node",
                                        "@timespan",
                                        "@timestamp"};

// Set once by guard_basp, before the actor system exists; read-only after.
std::unordered_set<std::string> allowed_names;

// "@<>+@atom+@str": empty when every name is allowed, else the first that is not.
std::string refused_name(const std::string& names) {
  if (names == "@<>")
    return {};
  if (names.compare(0, 4, "@<>+") != 0)
    return names.empty() ? std::string("(no type name)") : names;
  size_t from = 4;
  for (;;) {
    auto plus = names.find('+', from);
    auto name = names.substr(from, plus == std::string::npos ? std::string::npos : plus - from);
    if (!troupe::basp_type_allowed(name))
      return name.empty() ? std::string("(empty type name)") : name;
    if (plus == std::string::npos)
      return {};
    from = plus + 1;
  }
}

// Why the type names a message about to be decoded from `bytes` declares
// are refused (empty: allowed); `names` receives them.
std::string names_problem(caf::binary_deserializer& bytes, std::string& names) {
  uint16_t zero = 0;
  if (auto err = bytes.begin_object(zero, names))
    return "unreadable type names";
  if (zero != 0)
    return "a numbered type";
  auto refused = refused_name(names);
  return refused.empty() ? std::string() : "type " + refused + " is not part of Troupe's protocol";
}

std::string names_problem(caf::binary_deserializer& bytes) {
  std::string names;
  return names_problem(bytes, names);
}

// CAF's broker takes (link, actor) and (unlink, actor) as a proxy's link
// request and casts the actor to a proxy without checking: naming one of
// this node's own actors would call into it as if it were a proxy. Troupe
// never links across nodes, so no peer may send either.
std::string link_problem(caf::binary_deserializer& bytes, const std::string& names) {
  if (names != "@<>+@atom+@strong_actor_ptr")
    return {};
  caf::atom_value what{};
  if (bytes(what))
    return "an unreadable atom";
  if (what == caf::link_atom::value || what == caf::unlink_atom::value)
    return "a link request (Troupe links no actors across nodes)";
  return {};
}

// "10.0.0.7:51234" for a connection handle (its id is the socket).
std::string peer_of(int64_t handle) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(static_cast<int>(handle), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return "an unknown peer";
  char text[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto& a4 = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a4.sin_addr, text, sizeof(text));
    port = ntohs(a4.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto& a6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a6.sin6_addr, text, sizeof(text));
    port = ntohs(a6.sin6_port);
  }
  return std::string(text) + ":" + std::to_string(port);
}

// A flood of refusals must not flood the log: the first 50, then every 1000th.
bool worth_logging(uint64_t count) {
  return count <= 50 || count % 1000 == 0;
}

void refuse_frame(int64_t handle, const std::string& why) {
  auto count = ++refused_frames;
  if (worth_logging(count))
    spdlog::warn("closed the connection of {}: {} (refusal {} of this process; only the cluster's "
                 "own tasks should reach this port: see docs/operations.md#security)",
                 peer_of(handle), why, count);
}

void release_pending(int64_t handle) {
  std::lock_guard<std::mutex> lock(limits_mutex);
  auto it = pending_by_connection.find(handle);
  if (it == pending_by_connection.end())
    return;
  pending_total -= it->second;
  pending_by_connection.erase(it);
}

// Why a header may not announce its payload, or empty (then it is counted).
std::string reserve_pending(int64_t handle, const caf::io::basp::header& hdr) {
  using caf::io::basp::message_type;
  std::lock_guard<std::mutex> lock(limits_mutex);
  bool message = hdr.operation == message_type::direct_message
                 || hdr.operation == message_type::routed_message;
  auto bound = message ? limits.max_message_bytes : limits.max_control_bytes;
  if (hdr.payload_len > bound)
    return "a frame announcing " + std::to_string(hdr.payload_len) + " bytes (the limit is "
           + std::to_string(bound) + ")";
  if (pending_total + hdr.payload_len > limits.max_pending_bytes)
    return "a frame announcing " + std::to_string(hdr.payload_len) + " bytes while "
           + std::to_string(pending_total) + " announced bytes are still awaited (the limit is "
           + std::to_string(limits.max_pending_bytes) + ")";
  pending_by_connection[handle] += hdr.payload_len;
  pending_total += hdr.payload_len;
  return {};
}

} // namespace

// -- the interposed CAF functions (exported: libcaf must bind to them) --------

namespace caf {
namespace io {
namespace basp {

__attribute__((visibility("default"))) connection_state
instance::handle(execution_unit* ctx, new_data_msg& dm, header& hdr, bool is_payload) {
  using original_fn = connection_state (instance::*)(execution_unit*, new_data_msg&, header&, bool);
  static const auto original = member_at<original_fn>(next_definition(handle_symbol));
  if (!guard_on.load(std::memory_order_acquire))
    return (this->*original)(ctx, dm, hdr, is_payload);
  auto id = dm.handle.id();
  if (!is_payload) {
    auto state = (this->*original)(ctx, dm, hdr, false);
    if (state != await_payload)
      return state;
    if (auto why = reserve_pending(id, hdr); !why.empty()) {
      refuse_frame(id, why);
      return malformed_basp_message;
    }
    return state;
  }
  release_pending(id);
  if (hdr.operation == message_type::direct_message
      || hdr.operation == message_type::routed_message) {
    auto why = troupe::judge_basp_message(ctx, hdr.operation == message_type::routed_message,
                                          make_message_id(hdr.operation_data).is_response(),
                                          dm.buf.data(), dm.buf.size());
    if (!why.empty()) {
      refuse_frame(id, why);
      return malformed_basp_message;
    }
  }
  auto state = (this->*original)(ctx, dm, hdr, true);
  // dm.buf is the connection's receive buffer (CAF swaps it back after this
  // call): a large one would stay allocated for the connection's life.
  if (dm.buf.capacity() > kept_buffer_bytes)
    std::vector<char>().swap(dm.buf);
  return state;
}

} // namespace basp

__attribute__((visibility("default"))) void basp_broker::connection_cleanup(connection_handle hdl,
                                                                            sec code) {
  using original_fn = void (basp_broker::*)(connection_handle, sec);
  static const auto original = member_at<original_fn>(next_definition(cleanup_symbol));
  release_pending(hdl.id());
  (this->*original)(hdl, code);
}

} // namespace io

__attribute__((visibility("default"))) error message::load(deserializer& source) {
  using original_fn = error (message::*)(deserializer&);
  static const auto original = member_at<original_fn>(next_definition(load_symbol));
  if (!guard_on.load(std::memory_order_acquire))
    return (this->*original)(source);
  if (nesting >= max_nesting) {
    ++dropped_messages;
    return make_error(sec::malformed_basp_message, "messages nested deeper than 4 levels");
  }
  if (auto* bytes = dynamic_cast<binary_deserializer*>(&source)) {
    binary_deserializer peek{bytes->context(), bytes->remainder()};
    if (auto why = names_problem(peek); !why.empty()) {
      ++dropped_messages;
      return make_error(sec::malformed_basp_message, why);
    }
  }
  struct depth {
    depth() { ++nesting; }
    ~depth() { --nesting; }
  } level;
  try {
    return (this->*original)(source);
  } catch (const std::exception& e) {
    ++dropped_messages;
    return make_error(sec::malformed_basp_message, std::string("undecodable message: ") + e.what());
  } catch (...) {
    ++dropped_messages;
    return make_error(sec::malformed_basp_message, "undecodable message");
  }
}

} // namespace caf

// -- the guard's own interface -------------------------------------------------

namespace troupe {

void guard_basp(const caf::actor_system_config& cfg, const basp_limits& new_limits) {
  allowed_names.clear();
  allowed_names.insert(std::begin(allowed_builtins), std::end(allowed_builtins));
  // The names Troupe's types go by on the wire: the first a type was
  // registered under (add_message_type also names vectors of it).
#define TROUPE_ALLOW_TYPE(type)                                                                    \
  if (auto it = cfg.type_names_by_rtti.find(typeid(type)); it != cfg.type_names_by_rtti.end())     \
    allowed_names.insert(it->second);
  TROUPE_MESSAGE_TYPES(TROUPE_ALLOW_TYPE)
#undef TROUPE_ALLOW_TYPE
  {
    std::lock_guard<std::mutex> lock(limits_mutex);
    limits = new_limits;
  }
  guard_on.store(true, std::memory_order_release);
}

std::string basp_guard_problem() {
  struct probe {
    const char* symbol;
    const char* what;
  };
  for (auto p :
       {probe{handle_symbol, "basp::instance::handle"}, probe{load_symbol, "message::load"},
        probe{cleanup_symbol, "basp_broker::connection_cleanup"}}) {
    void* first = dlsym(RTLD_DEFAULT, p.symbol);
    void* next = dlsym(RTLD_NEXT, p.symbol);
    if (first == nullptr || next == nullptr)
      return std::string("CAF's ") + p.what + " was not found";
    if (first == next)
      return std::string("CAF's ") + p.what
             + " is not interposed (the executable does not "
               "export the guard's definition)";
  }
  return {};
}

bool basp_type_allowed(const std::string& name) {
  return allowed_names.count(name) > 0;
}

const std::vector<std::string>& caf_builtin_type_names() {
  // type_nrs counts "no type" as well.
  static const std::vector<std::string> names(caf::numbered_type_names,
                                              caf::numbered_type_names + caf::type_nrs - 1);
  return names;
}

basp_refusals basp_guard_refusals() {
  return {refused_frames.load(), dropped_messages.load()};
}

std::string judge_basp_message(caf::execution_unit* context, bool routed, bool response,
                               const char* payload, size_t size) {
  try {
    caf::binary_deserializer source{context, payload, size};
    if (routed) {
      caf::node_id from;
      caf::node_id to;
      if (auto err = source(from, to))
        return "unreadable source and destination nodes";
    }
    size_t stages = 0;
    if (auto err = source.begin_sequence(stages))
      return "unreadable stages";
    if (stages != 0)
      return "a message with forwarding stages (Troupe sends none)";
    std::string names;
    if (auto why = names_problem(source, names); !why.empty())
      return why;
    // An actor takes an error that is not a response as its own failure
    // (CAF's default error handler quits).
    if (names == "@<>+@error" && !response)
      return "an error that answers no request";
    return link_problem(source, names);
  } catch (const std::exception& e) {
    return std::string("an undecodable message header: ") + e.what();
  }
}

} // namespace troupe
