#pragma once
// Every CUDA runtime call goes through TROUPE_CUDA_CHECK: a failure throws a
// troupe_error naming the call, file and line; nothing aborts the process.
#include <string>

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
