// Fuzz target: bytes a peer controls, through CAF's binary deserialiser, as
// BASP hands them over, with the BASP guard on as in troupe-node: a whole
// caf::message (type names, then each value), the broker's gate on a direct
// or routed message's payload followed by its decoding, or one value of
// each type in TROUPE_MESSAGE_TYPES. The first byte picks which. Any crash,
// hang, leak or allocation beyond libFuzzer's limit is a finding; a refused
// input is not.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>

#include "actors/protocol/basp_guard.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/wire.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

struct fuzz_config : caf::actor_system_config {
  fuzz_config() {
    load<caf::io::middleman>();
    troupe::register_protocol(*this);
    set("scheduler.max-threads", 1);
  }
};

caf::actor_system& fuzz_system() {
  // Never destroyed: libFuzzer ends the process with exit().
  static auto* cfg = new fuzz_config;
  static auto* sys = [] {
    if (auto problem = troupe::basp_guard_problem(); !problem.empty()) {
      std::fprintf(stderr, "messages fuzz: %s\n", problem.c_str());
      std::abort(); // fuzzing CAF without the guard tests nothing troupe-node runs
    }
    troupe::guard_basp(*cfg, troupe::basp_limits{});
    return new caf::actor_system(*cfg);
  }();
  return *sys;
}

template <class T>
void decode(caf::binary_deserializer& source) {
  T value;
  static_cast<void>(source(value));
}

// A message payload as the broker gets it: the gate first, and CAF's
// decoding (stages, then the message) only when the gate lets it through.
template <bool Routed>
void gate_then_decode(caf::binary_deserializer& source) {
  auto bytes = source.remainder();
  auto* data = reinterpret_cast<const char*>(bytes.data());
  if (!troupe::judge_basp_message(source.context(), Routed, false, data, bytes.size()).empty())
    return;
  if (Routed) {
    caf::node_id from, to;
    if (source(from, to))
      return;
  }
  std::vector<caf::strong_actor_ptr> stages;
  caf::message msg;
  static_cast<void>(source(stages, msg));
}

using namespace troupe;

#define TROUPE_DECODER(type) &decode<type>,
// The gate's decoders come last so that the committed seeds' first bytes
// keep their meaning.
void (*const decoders[])(caf::binary_deserializer&) = {
  &decode<caf::message>, TROUPE_MESSAGE_TYPES(TROUPE_DECODER) & gate_then_decode<false>,
  &gate_then_decode<true>};
#undef TROUPE_DECODER

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  // As troupe-node does for a model whose largest variable has 1M floats.
  set_max_wire_elements(size_t{1} << 20);
  auto& sys = fuzz_system();
  auto pick = data[0] % std::size(decoders);
  caf::binary_deserializer source{sys, reinterpret_cast<const char*>(data + 1), size - 1};
  decoders[pick](source);
  return 0;
}
