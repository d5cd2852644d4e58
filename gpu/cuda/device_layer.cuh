#pragma once
// What the CUDA layers share: the device context a model computes in (its
// streams, cuBLAS handle and memory), cuBLAS helpers, and the interface each
// layer family implements (dense_layer.cu, conv2d_layer.cu, pooling_layer.cu,
// elementwise_layers.cu), as the CPU layers do in tensor/nn.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpu/cuda/check.cuh"
#include "gpu/cuda/device_memory.cuh"
#include "gpu/cuda/kernels.cuh"
#include "tensor/nn/model.hpp"

namespace troupe::gpu::cuda {

/// Owns the stream, cuBLAS handle and memory of one device model.
struct device_context {
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t copies = nullptr;
  cublasHandle_t blas = nullptr;
  device_pool pool;
  device_array<float> ones; // for bias gradients as a GEMV

  device_context(int index, size_t limit) : device(index), pool(limit), ones(pool) {
    TROUPE_CUDA_CHECK(cudaSetDevice(device));
    TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
    TROUPE_CUDA_CHECK(cublasCreate(&blas));
    TROUPE_CUDA_CHECK(cublasSetStream(blas, compute));
  }
  ~device_context() {
    cudaSetDevice(device);
    if (blas)
      cublasDestroy(blas);
    if (compute)
      cudaStreamDestroy(compute);
    if (copies)
      cudaStreamDestroy(copies);
  }
  device_context(const device_context&) = delete;
  device_context& operator=(const device_context&) = delete;

  const float* ones_of(size_t n) {
    if (ones.size() < n) {
      ones.resize(n);
      fill(ones.data(), 1.0f, n, compute);
    }
    return ones.data();
  }
};

/// Device memory for a model: `fraction` of the device's total.
size_t device_limit(int device, double fraction);

/// Row-major C[m x n] = op(A) op(B) + beta C with cuBLAS (column-major),
/// through element::row_major_gemm's argument mapping.
void gemm(device_context& cx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
          const float* a, const float* b, float* c, float beta = 0.0f);

/// db[cols] = column sums of dy[rows x cols].
void column_sums(device_context& cx, const float* dy, int64_t rows, int64_t cols, float* db);

/// The window of a convolution or pooling layer over a batch.
window_geometry geometry_of(const layer_desc& d, int64_t batch);

/// One layer's forward and backward pass, launched on cx.compute.
class device_layer {
public:
  explicit device_layer(layer_desc d) : d_(std::move(d)) {}
  virtual ~device_layer() = default;
  virtual void forward(device_context& cx, int64_t batch, const float* x, float* y,
                       const float* const* params, bool training) = 0;
  /// dx may be null (the first layer); grads follow the layer's variables.
  /// See layer::skip_training_steps.
  virtual void skip_training_steps(uint64_t /*steps*/, int64_t /*batch*/) {}
  virtual void backward(device_context& cx, int64_t batch, const float* x, const float* y,
                        const float* dy, float* dx, const float* const* params,
                        float* const* grads) = 0;

protected:
  layer_desc d_;
};

/// The device layer for a layer's description; throws troupe_error for a
/// kind with none (flatten, which the model skips).
std::unique_ptr<device_layer> make_device_layer(const layer_desc& d, device_pool& pool);

// One factory per layer family, each in its own file.
std::unique_ptr<device_layer> make_device_dense(const layer_desc& d);
std::unique_ptr<device_layer> make_device_conv2d(const layer_desc& d, device_pool& pool);
std::unique_ptr<device_layer> make_device_max_pool(const layer_desc& d, device_pool& pool);
std::unique_ptr<device_layer> make_device_relu(const layer_desc& d);
std::unique_ptr<device_layer> make_device_dropout(const layer_desc& d, device_pool& pool);

} // namespace troupe::gpu::cuda
