// Max pooling on a CUDA device (tensor/nn/pooling_layer.cpp on the CPU).
#include "gpu/cuda/device_layer.cuh"

namespace troupe::gpu::cuda {

namespace {

class max_pool final : public device_layer {
public:
  max_pool(layer_desc d, device_pool& pool) : device_layer(std::move(d)), argmax_(pool) {}
  void forward(device_context& cx, int64_t batch, const float* x, float* y, const float* const*,
               bool) override {
    auto g = geometry_of(d_, batch);
    argmax_.resize(static_cast<size_t>(batch * num_elements(d_.output)));
    max_pool_forward(x, y, argmax_.data(), g, d_.applies_input_relu, cx.compute);
  }
  void backward(device_context& cx, int64_t batch, const float*, const float*, const float* dy,
                float* dx, const float* const*, float* const*) override {
    if (dx)
      max_pool_backward(dy, argmax_.data(), dx, geometry_of(d_, batch), cx.compute);
  }

private:
  device_array<int32_t> argmax_;
};

} // namespace

std::unique_ptr<device_layer> make_device_max_pool(const layer_desc& d, device_pool& pool) {
  return std::make_unique<max_pool>(d, pool);
}

} // namespace troupe::gpu::cuda
