#include "gpu/cuda/kernels.cuh"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/transform_iterator.h>

#include "gpu/cuda/check.cuh"

namespace troupe::gpu::cuda {

namespace {

constexpr int threads_per_block = 256;

unsigned blocks_for(size_t n) {
  return static_cast<unsigned>(std::max<size_t>(1, (n + threads_per_block - 1) / threads_per_block));
}

// Kernels index with 32-bit integers (64-bit division costs several times
// more on a GPU); every launch checks that its index range fits.
struct geometry32 {
  int batch, h, w, c, kh, kw, stride, top, left, oh, ow;
};

int checked_int(int64_t n, const char* what) {
  if (n < 0 || n > INT32_MAX)
    throw troupe_error(std::string(what) + ": " + std::to_string(n)
                       + " elements do not fit one kernel launch; lower the batch size");
  return static_cast<int>(n);
}

geometry32 narrow(const window_geometry& g) {
  auto n = [](int64_t v) { return checked_int(v, "window geometry"); };
  return {n(g.batch), n(g.h), n(g.w), n(g.c), n(g.kh), n(g.kw), n(g.stride), n(g.top),
          n(g.left), n(g.oh), n(g.ow)};
}

#define TROUPE_LAUNCH(kernel, n, stream, ...)                                         \
  do {                                                                                \
    if ((n) > 0) {                                                                    \
      kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(__VA_ARGS__);           \
      TROUPE_CUDA_CHECK(cudaGetLastError());                                          \
    }                                                                                 \
  } while (0)

__global__ void im2col_kernel(const float* x, float* col, geometry32 g, int first, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total)
    return;
  int k = g.kh * g.kw * g.c;
  int r = i / k, j = i - r * k;
  int ci = j % g.c, kx = (j / g.c) % g.kw, ky = j / (g.c * g.kw);
  int ox = r % g.ow, oy = (r / g.ow) % g.oh, b = first + r / (g.ow * g.oh);
  int iy = oy * g.stride - g.top + ky, ix = ox * g.stride - g.left + kx;
  col[i] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
             ? x[(static_cast<size_t>(b) * g.h + iy) * g.w * g.c + ix * g.c + ci]
             : 0.0f;
}

__global__ void col2im_kernel(const float* col, float* dx, geometry32 g, int first, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total)
    return;
  int ci = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h,
      b = i / (g.c * g.w * g.h);  // within the chunk
  int k = g.kh * g.kw * g.c;
  float sum = 0.0f;
  for (int ky = 0; ky < g.kh; ++ky) {
    int ty = iy + g.top - ky;
    if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh)
      continue;
    int oy = ty / g.stride;
    for (int kx = 0; kx < g.kw; ++kx) {
      int tx = ix + g.left - kx;
      if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow)
        continue;
      int ox = tx / g.stride;
      sum += col[(static_cast<size_t>(b * g.oh + oy) * g.ow + ox) * k + (ky * g.kw + kx) * g.c + ci];
    }
  }
  dx[static_cast<size_t>(first) * g.h * g.w * g.c + i] = sum;
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
    y[i] = x[i] < 0.0f ? 0.0f : x[i];  // as the CPU's max: a NaN stays NaN (fmaxf would drop it)
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* argmax, geometry32 g,
                                        bool relu, int total) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= total)
    return;
  int ch = o % g.c, ox = (o / g.c) % g.ow, oy = (o / (g.c * g.ow)) % g.oh,
      b = o / (g.c * g.ow * g.oh);
  float best = -FLT_MAX;
  int best_at = -1;
  for (int ky = 0; ky < g.kh; ++ky) {
    int iy = oy * g.stride - g.top + ky;
    if (iy < 0 || iy >= g.h)
      continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      int ix = ox * g.stride - g.left + kx;
      if (ix < 0 || ix >= g.w)
        continue;
      int at = ((b * g.h + iy) * g.w + ix) * g.c + ch;
      if (best_at < 0 || x[at] > best) {
        best = x[at];
        best_at = at;
      }
    }
  }
  if (relu && !(best > 0.0f)) {
    best = 0.0f;
    best_at = -1;
  }
  y[o] = best;
  argmax[o] = best_at;
}

__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, float* dx,
                                         geometry32 g, int total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total)
    return;
  int ch = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h,
      b = i / (g.c * g.w * g.h);
  float sum = 0.0f;
  // Windows (oy, ox) with oy*s - top <= iy < oy*s - top + kh, and likewise for x.
  int oy_lo = max(0, (iy + g.top - g.kh + g.stride) / g.stride);
  int oy_hi = min(g.oh - 1, (iy + g.top) / g.stride);
  int ox_lo = max(0, (ix + g.left - g.kw + g.stride) / g.stride);
  int ox_hi = min(g.ow - 1, (ix + g.left) / g.stride);
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      int o = ((b * g.oh + oy) * g.ow + ox) * g.c + ch;
      if (argmax[o] == i)
        sum += dy[o];
    }
  dx[i] = sum;
}

// The CPU dropout's generator (tensor/layers.cpp): SplitMix64 over a
// counter, each 64-bit draw deciding two values. It is counter-based, so each
// thread computes its own draw, and CPU and GPU workers draw the same masks.
__device__ uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, size_t n,
                               uint64_t keep_below, float scale, uint64_t counter) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  uint64_t bits = splitmix64(counter + (i / 2 + 1) * 0x9e3779b97f4a7c15ull) >> (32 * (i % 2));
  float m = (bits & 0xffffffffu) < keep_below ? scale : 0.0f;
  mask[i] = m;
  y[i] = x[i] * m;
}

__global__ void multiply_kernel(const float* a, const float* b, float* out, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    out[i] = a[i] * b[i];
}

__global__ void softmax_xent_kernel(const float* logits, const int32_t* labels, float* loss,
                                    int32_t* correct, float* grad, int64_t rows,
                                    int64_t classes) {
  int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows)
    return;
  const float* z = logits + r * classes;
  float top = z[0];
  int64_t best = 0;
  for (int64_t j = 1; j < classes; ++j)
    if (z[j] > top) {
      top = z[j];
      best = j;
    }
  float sum = 0.0f;
  for (int64_t j = 0; j < classes; ++j)
    sum += expf(z[j] - top);
  int32_t label = labels[r];
  loss[r] = logf(sum) - (z[label] - top);
  correct[r] = best == label ? 1 : 0;
  if (grad) {
    float inv_rows = 1.0f / static_cast<float>(rows);
    for (int64_t j = 0; j < classes; ++j)
      grad[r * classes + j] = (expf(z[j] - top) / sum - (j == label ? 1.0f : 0.0f)) * inv_rows;
  }
}

struct square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};

} // namespace

void im2col(const float* x, float* col, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream) {
  int total = checked_int(count * g.oh * g.ow * g.kh * g.kw * g.c, "im2col");
  TROUPE_LAUNCH(im2col_kernel, static_cast<size_t>(total), stream, x, col, narrow(g),
                checked_int(first, "im2col"), total);
}

void col2im(const float* col, float* dx, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream) {
  int total = checked_int(count * g.h * g.w * g.c, "col2im");
  TROUPE_LAUNCH(col2im_kernel, static_cast<size_t>(total), stream, col, dx, narrow(g),
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

void max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                       const window_geometry& g, cudaStream_t stream) {
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
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch, scratch_bytes, in, out,
                                              static_cast<int>(n), ::cuda::std::plus<>{}, 0.0,
                                              stream));
}

void sum_ints(const int32_t* in, int64_t* out, size_t n, void* scratch, size_t scratch_bytes,
              cudaStream_t stream) {
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch, scratch_bytes, in, out,
                                              static_cast<int>(n), ::cuda::std::plus<>{},
                                              int64_t{0}, stream));
}

void sum_squares(const float* in, double* out, size_t n, void* scratch, size_t scratch_bytes,
                 cudaStream_t stream) {
  auto squares = thrust::make_transform_iterator(in, square{});
  TROUPE_CUDA_CHECK(cub::DeviceReduce::Reduce(scratch, scratch_bytes, squares, out,
                                              static_cast<int>(n), ::cuda::std::plus<>{}, 0.0,
                                              stream));
}

} // namespace troupe::gpu::cuda
