#pragma once
// Software prefetches for the embedding table's grouped lookups and pushes.
// On x86 an asm statement, not __builtin_prefetch: GCC 12 at -O2 emitted no
// instruction at all for the builtin in lookup's row pass (and dropped the
// find that fed it), so every row was read cold;
// tests/integration/prefetch_emitted_test.sh counts what the library holds.
#include <cstddef>
#include <cstdint>

namespace troupe {

/// Asks for the cache line holding `at`.
inline void prefetch_line(const void* at) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(at)));
#else
  __builtin_prefetch(at);
#endif
}

/// Every cache line of [at, at + bytes): a row's stride is rarely a
/// multiple of 64 bytes, so its values mostly straddle one more line than
/// their size.
inline void prefetch_lines(const void* at, size_t bytes) {
  auto first = reinterpret_cast<uintptr_t>(at) & ~uintptr_t{63};
  auto end = reinterpret_cast<uintptr_t>(at) + bytes;
  for (auto line = first; line < end; line += 64)
    prefetch_line(reinterpret_cast<const void*>(line));
}

} // namespace troupe
