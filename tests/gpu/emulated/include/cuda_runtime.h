#pragma once
// The CUDA runtime, emulated on the CPU for tests (see tests/gpu/emulated/README.md): the
// subset gpu/cuda uses, with the semantics that matter for its correctness.
// Work queued on a stream runs only when the host waits for it, and then in
// an order that honours only the dependencies the code declared (stream
// order, cudaStreamWaitEvent), so a missing wait or a host read before a
// synchronisation reads stale data instead of passing by luck. New device
// and pinned memory is filled with 0xFF bytes (NaN floats), so a read of
// memory nothing wrote shows; device memory faults when host code touches
// it, and a kernel's pointer arguments must be device memory. Not emulated:
// concurrency, timing.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#define __global__
#define __host__
#define __device__

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevice = 101,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};

constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDisableTiming = 2;

namespace troupe_emulation {
struct stream;
struct event;
} // namespace troupe_emulation

using cudaStream_t = troupe_emulation::stream*;
using cudaEvent_t = troupe_emulation::event*;

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major;
  int minor;
};

const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int device);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

template <class T>
cudaError_t cudaMalloc(T** pointer, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
template <class T>
cudaError_t cudaMallocHost(T** pointer, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(pointer), bytes);
}

namespace troupe_emulation {

/// Queues `work` on `s`; it runs when the host waits for it.
void enqueue(cudaStream_t s, std::function<void()> work);

/// True when [p, p + bytes) lies inside one device allocation.
bool on_device(const void* p, size_t bytes);

/// Aborts with a message naming `what` (a misuse a real device would punish
/// with a fault or garbage, made loud here).
[[noreturn]] void misuse(const char* what);

/// A kernel launch: every thread of every block, one after the other, when
/// the stream runs; arguments are taken by value at the launch, as CUDA does.
/// A pointer argument must be null or point into device memory.
template <class Kernel, class... Args>
void launch(cudaStream_t s, unsigned blocks, unsigned threads, Kernel kernel, Args... args) {
  auto on_device_or_not_a_pointer = [](const auto& arg) {
    if constexpr (std::is_pointer_v<std::decay_t<decltype(arg)>>)
      return !arg || on_device(arg, 1); // null: an output the kernel skips
    else
      return true;
  };
  if (!(on_device_or_not_a_pointer(args) && ...))
    misuse("a kernel argument points outside device memory");
  enqueue(s, [=] {
    gridDim.x = blocks;
    blockDim.x = threads;
    for (unsigned b = 0; b < blocks; ++b)
      for (unsigned t = 0; t < threads; ++t) {
        blockIdx.x = b;
        threadIdx.x = t;
        kernel(args...);
      }
  });
}

} // namespace troupe_emulation
