#include "actors/net/wire_limits.hpp"

#include <atomic>

namespace troupe {

namespace {

std::atomic<size_t> wire_limit{size_t{1} << 28};
std::atomic<uint64_t> frame_limit{uint64_t{1} << 32};

} // namespace

void set_max_wire_elements(size_t elements) noexcept {
  wire_limit.store(elements, std::memory_order_relaxed);
}

size_t max_wire_elements() noexcept {
  return wire_limit.load(std::memory_order_relaxed);
}

void set_max_frame_bytes(uint64_t bytes) noexcept {
  frame_limit.store(bytes, std::memory_order_relaxed);
}

uint64_t max_frame_bytes() noexcept {
  return frame_limit.load(std::memory_order_relaxed);
}

} // namespace troupe
