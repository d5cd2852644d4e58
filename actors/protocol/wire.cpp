#include "actors/protocol/wire.hpp"

#include <atomic>

namespace troupe {

namespace {

std::atomic<size_t> wire_limit{size_t{1} << 28};

} // namespace

void set_max_wire_elements(size_t elements) noexcept {
  wire_limit.store(elements, std::memory_order_relaxed);
}

size_t max_wire_elements() noexcept {
  return wire_limit.load(std::memory_order_relaxed);
}

} // namespace troupe
