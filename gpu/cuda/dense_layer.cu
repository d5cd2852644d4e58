// The fully connected layer on a CUDA device: cuBLAS GEMMs, the bias
// gradient as a GEMV (tensor/nn/dense_layer.cpp on the CPU).
#include "gpu/cuda/device_layer.cuh"

namespace troupe::gpu::cuda {

namespace {

class dense final : public device_layer {
public:
  using device_layer::device_layer;
  void forward(device_context& cx, int64_t batch, const float* x, float* y,
               const float* const* params, bool) override {
    gemm(cx, false, false, batch, d_.units, in(), x, params[0], y);
    add_bias(y, params[1], batch, d_.units, cx.compute);
  }
  void backward(device_context& cx, int64_t batch, const float* x, const float*, const float* dy,
                float* dx, const float* const* params, float* const* grads) override {
    gemm(cx, true, false, in(), d_.units, batch, x, dy, grads[0]);
    column_sums(cx, dy, batch, d_.units, grads[1]);
    if (dx)
      gemm(cx, false, true, batch, in(), d_.units, dy, params[0], dx);
  }

private:
  int64_t in() const { return num_elements(d_.input); }
};

} // namespace

std::unique_ptr<device_layer> make_device_dense(const layer_desc& d) {
  return std::make_unique<dense>(d);
}

} // namespace troupe::gpu::cuda
