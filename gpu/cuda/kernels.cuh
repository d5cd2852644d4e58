#pragma once
// The GPU worker's own kernels (everything but GEMM, which is cuBLAS), as
// host functions that launch on a stream and check the launch. Layouts match
// the CPU layers: row-major, images NHWC, conv kernels [kh, kw, in, out].
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace troupe::gpu::cuda {

/// Geometry of a convolution or pooling window over an NHWC batch.
struct window_geometry {
  int64_t batch = 0, h = 0, w = 0, c = 0; ///< input
  int64_t kh = 0, kw = 0, stride = 1;
  int64_t top = 0, left = 0; ///< padding before the first row / column
  int64_t oh = 0, ow = 0;    ///< output
};

/// col[(b, oy, ox), (ky, kx, ci)] = x[b, oy*s - top + ky, ox*s - left + kx, ci], 0 outside.
void im2col(const float* x, float* col, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream);

/// dx[b, iy, ix, ci] = sum of the col entries im2col took from it (a gather:
/// deterministic, no atomics); writes every dx element of the chunk.
void col2im(const float* col, float* dx, const window_geometry& g, int64_t first, int64_t count,
            cudaStream_t stream);

/// y[r, j] += bias[j] for rows x cols.
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

void fill(float* x, float value, size_t n, cudaStream_t stream);

void relu_forward(const float* x, float* y, size_t n, cudaStream_t stream);

/// dx = dy where y > 0, else 0.
void relu_backward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream);

/// Max over each window (padding excluded); argmax holds the input index of
/// each output's maximum, -1 when `relu` made it 0.
void max_pool_forward(const float* x, float* y, int32_t* argmax, const window_geometry& g,
                      bool relu, cudaStream_t stream);

/// dx[i] = sum of dy over the outputs whose argmax is i (a gather over the
/// windows covering i).
void max_pool_backward(const float* dy, const int32_t* argmax, float* dx, const window_geometry& g,
                       cudaStream_t stream);

/// y = x * mask, mask = scale where value i's 32-bit draw falls below
/// keep_below, else 0. Draw i is half (i % 2) of SplitMix64(counter + (i / 2
/// + 1) * golden ratio): exactly the CPU dropout's masks; the caller then
/// advances its counter by (n + 1) / 2 draws, as the CPU layer does.
void dropout_forward(const float* x, float* y, float* mask, size_t n, uint64_t keep_below,
                     float scale, uint64_t counter, cudaStream_t stream);

/// out = a * b elementwise.
void multiply(const float* a, const float* b, float* out, size_t n, cudaStream_t stream);

/// Per row of logits [rows, classes]: loss[r] = -log softmax[label], correct[r]
/// = (argmax == label), and (if grad) grad = (softmax - onehot) / rows.
void softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                           int32_t* correct, float* grad, int64_t rows, int64_t classes,
                           cudaStream_t stream);

/// CUB reductions with caller-owned temporary storage (no allocation per
/// call): the bytes of scratch `sum_*` needs for n items.
size_t sum_scratch_bytes(size_t n);
void sum_floats(const float* in, double* out, size_t n, void* scratch, size_t scratch_bytes,
                cudaStream_t stream);
void sum_ints(const int32_t* in, int64_t* out, size_t n, void* scratch, size_t scratch_bytes,
              cudaStream_t stream);
/// out = sum of in[i]^2 (for the global gradient norm).
void sum_squares(const float* in, double* out, size_t n, void* scratch, size_t scratch_bytes,
                 cudaStream_t stream);

} // namespace troupe::gpu::cuda
