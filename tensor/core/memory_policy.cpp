#include "tensor/core/memory_policy.hpp"

#include <malloc.h>

namespace troupe {

void keep_freed_tensor_memory() noexcept {
  constexpr int one_gib = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, one_gib);
  mallopt(M_TRIM_THRESHOLD, one_gib);
  // One heap for every thread: a block freed by one thread (a bulk
  // connection's) serves the next allocation of any other (the shard's).
  mallopt(M_ARENA_MAX, 1);
}

} // namespace troupe
