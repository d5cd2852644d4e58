#pragma once
// cub::DeviceReduce::Reduce, emulated on the CPU for tests (see tests/gpu/emulated/README.md):
// the two-call protocol (a null scratch asks for its size; the size asked
// for grows with the item count, and a smaller scratch is an error, as a
// real one would overrun), the fold queued on the stream.
#include <cstddef>
#include <type_traits>

#include "cuda_runtime.h"

namespace cub {

struct DeviceReduce {
  // The pointer an input iterator reads from: itself, or a transform
  // iterator's base.
  template <class Input>
  static auto base_of(const Input& in) {
    if constexpr (std::is_pointer_v<Input>)
      return in;
    else
      return in.base;
  }

  static size_t scratch_bytes(int items) {
    return 256 + 16 * ((static_cast<size_t>(items) + 1023) / 1024);
  }

  template <class Input, class Output, class Op, class T>
  static cudaError_t Reduce(void* scratch, size_t& bytes, Input in, Output out, int items, Op op,
                            T init, cudaStream_t stream = nullptr) {
    if (items < 0)
      return cudaErrorInvalidValue;
    if (!scratch) {
      bytes = scratch_bytes(items);
      return cudaSuccess;
    }
    if (bytes < scratch_bytes(items) || !troupe_emulation::on_device(scratch, bytes))
      troupe_emulation::misuse("cub::DeviceReduce::Reduce: scratch smaller than asked for");
    if (!troupe_emulation::on_device(out, sizeof *out)
        || !troupe_emulation::on_device(base_of(in), items * sizeof *base_of(in)))
      troupe_emulation::misuse("cub::DeviceReduce::Reduce: an operand outside device memory");
    troupe_emulation::enqueue(stream, [=] {
      T total = init;
      for (int i = 0; i < items; ++i)
        total = op(total, in[i]);
      *out = total;
    });
    return cudaSuccess;
  }
};

} // namespace cub
