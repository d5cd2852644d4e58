#pragma once

// Denormal floats (below 1.2e-38) cost x86 cores tens of cycles per
// operation. Training makes them: Adam's first moment decays by beta1 each
// step its gradient is zero, so after a few hundred steps a third of a CNN's
// fc1 moments were denormal and the shard's update ran several times slower.
// TensorFlow computes every op with flush-to-zero and denormals-are-zero set
// (port::ScopedFlushDenormal); so does Troupe, around its CPU arithmetic: a
// value that would be denormal is zero instead. The mode is per thread and
// CAF runs many actors on one thread, so it is set for a scope and restored.

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#define TROUPE_HAS_MXCSR 1
#endif

namespace troupe {

class flush_denormals {
public:
#ifdef TROUPE_HAS_MXCSR
  flush_denormals() noexcept : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | flush_bits);
  }
  ~flush_denormals() {
    _mm_setcsr(saved_);
  }
#else
  flush_denormals() noexcept = default; // elsewhere denormals keep their IEEE meaning
#endif
  flush_denormals(const flush_denormals&) = delete;
  flush_denormals& operator=(const flush_denormals&) = delete;

private:
#ifdef TROUPE_HAS_MXCSR
  static constexpr unsigned flush_bits = 0x8040; // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_;
#endif
};

} // namespace troupe
