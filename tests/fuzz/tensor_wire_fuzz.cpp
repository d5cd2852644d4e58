// Fuzz target: the tensor wire format (actors/protocol/wire.hpp). Whatever
// decodes must encode and decode again to the same shape and the same bits
// (NaN payloads included); anything else must be refused without a crash or
// an allocation beyond what the bytes hold.
#include <cstdlib>
#include <cstring>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/protocol/wire.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::set_max_wire_elements(size_t{1} << 20);
  troupe::tensor first;
  caf::binary_deserializer source{nullptr, reinterpret_cast<const char*>(data), size};
  if (inspect(source, first))
    return 0; // refused
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  if (inspect(sink, first))
    std::abort(); // a decoded tensor must encode
  troupe::tensor second;
  caf::binary_deserializer again{nullptr, bytes};
  if (inspect(again, second) || second.shape() != first.shape()
      || (first.size() > 0
          && std::memcmp(second.data(), first.data(), first.size() * sizeof(float)) != 0))
    std::abort(); // the round trip must be exact
  return 0;
}
