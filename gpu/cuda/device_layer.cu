#include "gpu/cuda/device_layer.cuh"

#include "gpu/cuda/element_math.hpp"
#include "tensor/nn/layers.hpp"

namespace troupe::gpu::cuda {

size_t device_limit(int device, double fraction) {
  TROUPE_CUDA_CHECK(cudaSetDevice(device));
  size_t free = 0, total = 0;
  TROUPE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<size_t>(fraction * static_cast<double>(total));
}

void gemm(device_context& cx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
          const float* a, const float* b, float* c, float beta) {
  const float alpha = 1.0f;
  auto g = element::row_major_gemm(transpose_a, transpose_b, m, n, k, a, b);
  TROUPE_CUDA_CHECK(cublasSgemm(cx.blas, g.transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                g.transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N, g.rows, g.cols,
                                g.inner, &alpha, g.first, g.first_ld, g.second, g.second_ld, &beta,
                                c, g.c_ld));
}

void column_sums(device_context& cx, const float* dy, int64_t rows, int64_t cols, float* db) {
  const float alpha = 1.0f, beta = 0.0f;
  TROUPE_CUDA_CHECK(cublasSgemv(cx.blas, CUBLAS_OP_N, static_cast<int>(cols),
                                static_cast<int>(rows), &alpha, dy, static_cast<int>(cols),
                                cx.ones_of(static_cast<size_t>(rows)), 1, &beta, db, 1));
}

window_geometry geometry_of(const layer_desc& d, int64_t batch) {
  window_geometry g;
  g.batch = batch;
  g.h = d.input[0];
  g.w = d.input[1];
  g.c = d.input[2];
  g.kh = d.kernel_h;
  g.kw = d.kernel_w;
  g.stride = d.stride;
  g.oh = d.output[0];
  g.ow = d.output[1];
  g.top = pad_before(g.h, g.kh, g.stride, d.pad);
  g.left = pad_before(g.w, g.kw, g.stride, d.pad);
  return g;
}

std::unique_ptr<device_layer> make_device_layer(const layer_desc& d, device_pool& pool) {
  switch (d.type) {
    case layer_desc::kind::dense:
      return make_device_dense(d);
    case layer_desc::kind::conv2d:
      return make_device_conv2d(d, pool);
    case layer_desc::kind::max_pool:
      return make_device_max_pool(d, pool);
    case layer_desc::kind::relu:
      return make_device_relu(d);
    case layer_desc::kind::dropout:
      return make_device_dropout(d, pool);
    case layer_desc::kind::flatten:
    case layer_desc::kind::embedding:
      break;
  }
  throw troupe_error("layer " + d.name + " has no CUDA implementation");
}

} // namespace troupe::gpu::cuda
