#pragma once
// Every CUDA runtime and cuBLAS call goes through TROUPE_CUDA_CHECK or
// TROUPE_CUBLAS_CHECK: a failure throws a troupe_error naming the call, file
// and line; nothing aborts the process. Kernel launches are followed by
// TROUPE_CUDA_CHECK(cudaGetLastError()).
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tensor/error.hpp"

#define TROUPE_CUDA_CHECK(call)                                                    \
  do {                                                                             \
    cudaError_t troupe_status_ = (call);                                           \
    if (troupe_status_ != cudaSuccess)                                             \
      throw ::troupe::troupe_error(std::string(#call) + " failed at " + __FILE__   \
                                   + ":" + std::to_string(__LINE__) + ": "         \
                                   + cudaGetErrorString(troupe_status_));          \
  } while (0)

#define TROUPE_CUBLAS_CHECK(call)                                                  \
  do {                                                                             \
    cublasStatus_t troupe_status_ = (call);                                        \
    if (troupe_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      throw ::troupe::troupe_error(std::string(#call) + " failed at " + __FILE__   \
                                   + ":" + std::to_string(__LINE__) + ": "         \
                                   + cublasGetStatusName(troupe_status_));         \
  } while (0)
