#pragma once
// Every CUDA runtime and cuBLAS call goes through TROUPE_CUDA_CHECK: a
// failure throws a troupe_error naming the call, file and line; nothing
// aborts the process. Kernel launches are followed by
// TROUPE_CUDA_CHECK(cudaGetLastError()).
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tensor/core/error.hpp"

namespace troupe::gpu::cuda {

/// What went wrong, or null on success: one overload per status type.
inline const char* failure_of(cudaError_t status) {
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}

inline const char* failure_of(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? nullptr : cublasGetStatusName(status);
}

[[noreturn]] inline void throw_call_failure(const char* call, const char* file, int line,
                                            const char* what) {
  throw troupe_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": "
                     + what);
}

} // namespace troupe::gpu::cuda

#define TROUPE_CUDA_CHECK(call)                                                                    \
  do {                                                                                             \
    if (const char* troupe_failure_ = ::troupe::gpu::cuda::failure_of(call))                       \
      ::troupe::gpu::cuda::throw_call_failure(#call, __FILE__, __LINE__, troupe_failure_);         \
  } while (0)
