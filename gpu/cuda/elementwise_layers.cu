// ReLU and dropout on a CUDA device (tensor/nn/elementwise_layers.cpp on
// the CPU); flatten has no device layer, the model skips it.
#include "gpu/cuda/device_layer.cuh"

#include "gpu/cuda/element_math.hpp"

namespace troupe::gpu::cuda {

namespace {

class relu final : public device_layer {
public:
  using device_layer::device_layer;
  void forward(device_context& cx, int64_t batch, const float* x, float* y, const float* const*,
               bool) override {
    relu_forward(x, y, size(batch), cx.compute);
  }
  void backward(device_context& cx, int64_t batch, const float*, const float* y, const float* dy,
                float* dx, const float* const*, float* const*) override {
    if (dx)
      relu_backward(y, dy, dx, size(batch), cx.compute);
  }

private:
  size_t size(int64_t batch) const { return static_cast<size_t>(batch * num_elements(d_.input)); }
};

class dropout final : public device_layer {
public:
  dropout(layer_desc d, device_pool& pool) : device_layer(std::move(d)), mask_(pool) {}
  void forward(device_context& cx, int64_t batch, const float* x, float* y, const float* const*,
               bool training) override {
    auto n = static_cast<size_t>(batch * num_elements(d_.input));
    training_ = training && d_.rate > 0.0f;
    if (!training_) {
      TROUPE_CUDA_CHECK(
        cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, cx.compute));
      return;
    }
    mask_.resize(n);
    // The CPU layer's rule, to the bit: same threshold, scale and stream.
    auto keep_below = shared::dropout_keep_below(d_.rate);
    dropout_forward(x, y, mask_.data(), n, keep_below, 1.0f / (1.0f - d_.rate), counter_,
                    cx.compute);
    counter_ = shared::dropout_advance(counter_, n); // the draws the CPU layer makes
  }
  void skip_training_steps(uint64_t steps, int64_t batch) override {
    counter_ = shared::dropout_after_steps(d_.seed, steps,
                                           static_cast<uint64_t>(batch * num_elements(d_.input)));
  }
  void backward(device_context& cx, int64_t batch, const float*, const float*, const float* dy,
                float* dx, const float* const*, float* const*) override {
    if (!dx)
      return;
    auto n = static_cast<size_t>(batch * num_elements(d_.input));
    if (training_)
      multiply(dy, mask_.data(), dx, n, cx.compute);
    else
      TROUPE_CUDA_CHECK(
        cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, cx.compute));
  }

private:
  device_array<float> mask_;
  uint64_t counter_ = d_.seed; // the CPU layer starts its counter at the seed
  bool training_ = false;
};

} // namespace

std::unique_ptr<device_layer> make_device_relu(const layer_desc& d) {
  return std::make_unique<relu>(d);
}

std::unique_ptr<device_layer> make_device_dropout(const layer_desc& d, device_pool& pool) {
  return std::make_unique<dropout>(d, pool);
}

} // namespace troupe::gpu::cuda
