#pragma once
// What each GPU thread computes, as plain functions of its index: the kernels
// in kernels.cu call them, and tests/gpu/element_math_test.cpp runs them on
// the CPU over every index against the CPU layers, so the index arithmetic
// (NHWC, padding, stride, chunks), the pooling windows and the cuBLAS
// argument mapping are checked on machines without a GPU. The arithmetic
// the CPU layers share with the kernels (dropout masks, softmax
// cross-entropy) is tensor/nn/shared_math.hpp, included here.
// No CUDA headers: this compiles with the C++ compiler too.
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tensor/nn/shared_math.hpp"

namespace troupe::gpu::element {

/// A convolution or pooling window over an NHWC batch, in 32-bit integers
/// (64-bit division costs several times more on a GPU).
struct geometry32 {
  int batch, h, w, c, kh, kw, stride, top, left, oh, ow;
};

/// `width` floats moved as one access: 16-byte loads and stores on the
/// device for width 4 (the caller checks the alignment).
template <int width>
struct alignas(sizeof(float) * width) float_group {
  float v[width];
};

/// im2col over runs of `width` channels (g.c % width == 0): group i writes
/// col[i * width, (i + 1) * width) of the [count * oh * ow, kh * kw * c]
/// rows of examples first..., the same channels of one input position, or
/// zeros in the padding. Width 4 quarters the threads and their index
/// divisions, which bounded the one-float-per-thread kernel (2.9 ms of a
/// 6.7 ms CNN step at batch 1024 on an H200).
template <int width>
TROUPE_HD inline void im2col(int i, const float* x, float* col, const geometry32& g, int first) {
  int groups = g.c / width, per_row = g.kh * g.kw * groups;
  int r = i / per_row, j = i - r * per_row;
  int kxy = j / groups, cg = j - kxy * groups;
  int ky = kxy / g.kw, kx = kxy - ky * g.kw;
  int rows_per_example = g.ow * g.oh;
  int e = r / rows_per_example, orow = r - e * rows_per_example;
  int oy = orow / g.ow, ox = orow - oy * g.ow;
  int iy = oy * g.stride - g.top + ky, ix = ox * g.stride - g.left + kx;
  auto* out = reinterpret_cast<float_group<width>*>(col) + i;
  if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
    *out = *reinterpret_cast<const float_group<width>*>(
      x + (static_cast<size_t>(first + e) * g.h + iy) * g.w * g.c + ix * g.c + cg * width);
  else
    *out = float_group<width>{};
}

/// dx of the run of `width` input channels i (g.c % width == 0) in the chunk
/// starting at example `first`: the sums of the unfolded entries taken from
/// them (a gather, no atomics), `width` channels per thread as in im2col.
template <int width>
TROUPE_HD inline void col2im(int i, const float* col, float* dx, const geometry32& g, int first) {
  int groups = g.c / width;
  int pixel = i / groups, cg = i - pixel * groups;
  int row = pixel / g.w, ix = pixel - row * g.w;
  int b = row / g.h, iy = row - b * g.h; // b within the chunk
  int k = g.kh * g.kw * g.c;
  float_group<width> sum{};
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
      auto taken = *reinterpret_cast<const float_group<width>*>(
        col + (static_cast<size_t>(b * g.oh + oy) * g.ow + ox) * k + (ky * g.kw + kx) * g.c
        + cg * width);
      for (int v = 0; v < width; ++v)
        sum.v[v] += taken.v[v];
    }
  }
  reinterpret_cast<float_group<width>*>(dx + static_cast<size_t>(first) * g.h * g.w * g.c)[i] = sum;
}

/// As the CPU's max(x, 0): a NaN stays NaN, -0 stays -0.
TROUPE_HD inline float relu(float x) {
  return x < 0.0f ? 0.0f : x;
}

/// Output o of a max-pool: the first maximum of its window (padding
/// excluded); with `relu`, 0 and no argmax (-1) when nothing is positive.
TROUPE_HD inline void max_pool_forward(int o, const float* x, float* y, int32_t* argmax,
                                       const geometry32& g, bool relu) {
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

/// dx of input i: the sum of dy over the windows whose maximum it was.
TROUPE_HD inline void max_pool_backward(int i, const float* dy, const int32_t* argmax, float* dx,
                                        const geometry32& g) {
  int ch = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h, b = i / (g.c * g.w * g.h);
  float sum = 0.0f;
  // Windows with oy*s - top <= iy < oy*s - top + kh, and likewise for x.
  int oy_lo = (iy + g.top - g.kh + g.stride) / g.stride, oy_hi = (iy + g.top) / g.stride;
  int ox_lo = (ix + g.left - g.kw + g.stride) / g.stride, ox_hi = (ix + g.left) / g.stride;
  oy_lo = oy_lo < 0 ? 0 : oy_lo;
  ox_lo = ox_lo < 0 ? 0 : ox_lo;
  oy_hi = oy_hi > g.oh - 1 ? g.oh - 1 : oy_hi;
  ox_hi = ox_hi > g.ow - 1 ? g.ow - 1 : ox_hi;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      int o = ((b * g.oh + oy) * g.ow + ox) * g.c + ch;
      if (argmax[o] == i)
        sum += dy[o];
    }
  dx[i] = sum;
}

/// The column-major GEMM call (cuBLAS's convention) that computes the
/// row-major C[m x n] = op(A) op(B) + beta C: C^T = op(B)^T op(A)^T, so the
/// operands swap and each keeps its own transpose flag.
struct column_major_gemm {
  bool transpose_first, transpose_second;
  int rows, cols, inner; // of the column-major product
  const float* first;
  int first_ld; // row-major B
  const float* second;
  int second_ld; // row-major A
  int c_ld;
};

inline column_major_gemm row_major_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                                        int64_t k, const float* a, const float* b) {
  return {transpose_b,
          transpose_a,
          static_cast<int>(n),
          static_cast<int>(m),
          static_cast<int>(k),
          b,
          static_cast<int>(transpose_b ? k : n),
          a,
          static_cast<int>(transpose_a ? m : k),
          static_cast<int>(n)};
}

} // namespace troupe::gpu::element
