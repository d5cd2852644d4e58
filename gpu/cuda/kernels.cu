#include "gpu/cuda/kernels.cuh"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/transform_iterator.h>

#include "gpu/cuda/check.cuh"
#include "gpu/cuda/element_math.hpp"

namespace troupe::gpu::cuda {

namespace {

constexpr int threads_per_block = 256;

unsigned blocks_for(size_t n) {
  return static_cast<unsigned>(
    std::max<size_t>(1, (n + threads_per_block - 1) / threads_per_block));
}

// Kernels index with 32-bit integers (64-bit division costs several times
// more on a GPU); every launch checks that its index range fits. What each
// thread computes is in element_math.hpp, checked on the CPU by the tests.
using element::geometry32;

int checked_int(int64_t n, const char* what) {
  if (n < 0 || n > INT32_MAX)
    throw troupe_error(std::string(what) + ": " + std::to_string(n)
                       + " elements do not fit one kernel launch; lower the batch size");
  return static_cast<int>(n);
}

geometry32 narrow(const window_geometry& g) {
  auto n = [](int64_t v) { return checked_int(v, "window geometry"); };
  return {n(g.batch),  n(g.h),   n(g.w),    n(g.c),  n(g.kh), n(g.kw),
          n(g.stride), n(g.top), n(g.left), n(g.oh), n(g.ow)};
}

#if defined(TROUPE_CUDA_EMULATION)
// tests/gpu/emulated: the same launch, run on the CPU when its stream runs.
#define TROUPE_LAUNCH(kernel, n, stream, ...)                                                      \
  do {                                                                                             \
    if ((n) > 0)                                                                                   \
      troupe_emulation::launch(stream, blocks_for(n), threads_per_block, kernel, __VA_ARGS__);     \
  } while (0)
#else
#define TROUPE_LAUNCH(kernel, n, stream, ...)                                                      \
  do {                                                                                             \
    if ((n) > 0) {                                                                                 \
      kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(__VA_ARGS__);                        \
      TROUPE_CUDA_CHECK(cudaGetLastError());                                                       \
    }                                                                                              \
  } while (0)
#endif

template <int width>
__global__ void im2col_kernel(const float* x, float* col, geometry32 g, int first, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total)
    element::im2col<width>(i, x, col, g, first);
}

template <int width>
__global__ void col2im_kernel(const float* col, float* dx, geometry32 g, int first, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total)
    element::col2im<width>(i, col, dx, g, first);
}

__global__ void add_bias_kernel(float* y, const float* bias, int cols, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total)
    y[i] += bias[i % cols];
}

__global__ void fill_kernel(float* x, float value, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    x[i] = value;
}

__global__ void relu_forward_kernel(const float* x, float* y, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = element::relu(x[i]);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* argmax, geometry32 g,
                                        bool relu, int total) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o < total)
    element::max_pool_forward(o, x, y, argmax, g, relu);
}

__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, float* dx,
                                         geometry32 g, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total)
    element::max_pool_backward(i, dy, argmax, dx, g);
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, size_t n, uint64_t keep_below,
                               float scale, uint64_t counter) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  float m = shared::dropout_mask(shared::dropout_draw(counter, i / 2), static_cast<unsigned>(i % 2),
                                 keep_below, scale);
  mask[i] = m;
  y[i] = x[i] * m;
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    out[i] = a[i] * b[i];
}

__global__ void softmax_xent_kernel(const float* logits, const int32_t* labels, float* loss,
                                    int32_t* correct, float* grad, int64_t rows, int64_t classes) {
  int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows)
    return;
  bool hit = false;
  loss[r] = shared::softmax_xent_row<float>(logits + r * classes, classes, labels[r],
                                            1.0f / static_cast<float>(rows),
                                            grad ? grad + r * classes : nullptr, &hit);
  correct[r] = hit ? 1 : 0;
}

struct square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};

// Whether im2col and col2im may move runs of 4 channels as 16-byte accesses:
// every run starts at a multiple of 4 floats from aligned bases.
bool by_fours(const window_geometry& g, const float* image, const float* col) {
  auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return g.c % 4 == 0 && aligned(image) && aligned(col);
}

} // namespace

void im2col(const float* x, float* col, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream) {
  int total = checked_int(count * g.oh * g.ow * g.kh * g.kw * g.c, "im2col");
  if (by_fours(g, x, col))
    TROUPE_LAUNCH(im2col_kernel<4>, static_cast<size_t>(total / 4), stream, x, col, narrow(g),
                  checked_int(first, "im2col"), total / 4);
  else
    TROUPE_LAUNCH(im2col_kernel<1>, static_cast<size_t>(total), stream, x, col, narrow(g),
                  checked_int(first, "im2col"), total);
}

void col2im(const float* col, float* dx, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream) {
  int total = checked_int(count * g.h * g.w * g.c, "col2im");
  if (by_fours(g, dx, col))
    TROUPE_LAUNCH(col2im_kernel<4>, static_cast<size_t>(total / 4), stream, col, dx, narrow(g),
                  checked_int(first, "col2im"), total / 4);
  else
    TROUPE_LAUNCH(col2im_kernel<1>, static_cast<size_t>(total), stream, col, dx, narrow(g),
                  checked_int(first, "col2im"), total);
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  int total = checked_int(rows * cols, "add_bias");
  TROUPE_LAUNCH(add_bias_kernel, static_cast<size_t>(total), stream, y, bias,
                static_cast<int>(cols), total);
}

void fill(float* x, float value, size_t n, cudaStream_t stream) {
  TROUPE_LAUNCH(fill_kernel, n, stream, x, value, n);
}

void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  TROUPE_LAUNCH(relu_forward_kernel, n, stream, x, y, n);
}

void relu_backward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  TROUPE_LAUNCH(relu_backward_kernel, n, stream, y, dy, dx, n);
}

void max_pool_forward(const float* x, float* y, int32_t* argmax, const window_geometry& g,
                      bool relu, cudaStream_t stream) {
  // The input's indices are kept in int32 argmax entries too.
  checked_int(g.batch * g.h * g.w * g.c, "max_pool input");
  int total = checked_int(g.batch * g.oh * g.ow * g.c, "max_pool");
  TROUPE_LAUNCH(max_pool_forward_kernel, static_cast<size_t>(total), stream, x, y, argmax,
                narrow(g), relu, total);
}

void max_pool_backward(const float* dy, const int32_t* argmax, float* dx, const window_geometry& g,
                       cudaStream_t stream) {
  int total = checked_int(g.batch * g.h * g.w * g.c, "max_pool backward");
  TROUPE_LAUNCH(max_pool_backward_kernel, static_cast<size_t>(total), stream, dy, argmax, dx,
                narrow(g), total);
}

void dropout_forward(const float* x, float* y, float* mask, size_t n, uint64_t keep_below,
                     float scale, uint64_t counter, cudaStream_t stream) {
  TROUPE_LAUNCH(dropout_kernel, n, stream, x, y, mask, n, keep_below, scale, counter);
}

void multiply(const float* a, const float* b, float* out, size_t n, cudaStream_t stream) {
  TROUPE_LAUNCH(multiply_kernel, n, stream, a, b, out, n);
}

void softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                           int32_t* correct, float* grad, int64_t rows, int64_t classes,
                           cudaStream_t stream) {
  TROUPE_LAUNCH(softmax_xent_kernel, static_cast<size_t>(rows), stream, logits, labels, loss,
                correct, grad, rows, classes);
}

size_t sum_scratch_bytes(size_t n) {
  size_t a = 0, b = 0, c = 0;
  auto count = static_cast<int>(n);
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, a, static_cast<const float*>(nullptr),
                                              static_cast<double*>(nullptr), count,
                                              ::cuda::std::plus<>{}, 0.0));
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, b, static_cast<const int32_t*>(nullptr),
                                              static_cast<int64_t*>(nullptr), count,
                                              ::cuda::std::plus<>{}, int64_t{0}));
  auto squares = thrust::make_transform_iterator(static_cast<const float*>(nullptr), square{});
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, c, squares, static_cast<double*>(nullptr),
                                              count, ::cuda::std::plus<>{}, 0.0));
  return std::max({a, b, c, size_t{1}});
}

void sum_floats(const float* in, double* out, size_t n, void* scratch, size_t scratch_bytes,
                cudaStream_t stream) {
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch, scratch_bytes, in, out, static_cast<int>(n),
                                              ::cuda::std::plus<>{}, 0.0, stream));
}

void sum_ints(const int32_t* in, int64_t* out, size_t n, void* scratch, size_t scratch_bytes,
              cudaStream_t stream) {
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch, scratch_bytes, in, out, static_cast<int>(n),
                                              ::cuda::std::plus<>{}, int64_t{0}, stream));
}

void sum_squares(const float* in, double* out, size_t n, void* scratch, size_t scratch_bytes,
                 cudaStream_t stream) {
  auto squares = thrust::make_transform_iterator(in, square{});
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(
    scratch, scratch_bytes, squares, out, static_cast<int>(n), ::cuda::std::plus<>{}, 0.0, stream));
}

} // namespace troupe::gpu::cuda
