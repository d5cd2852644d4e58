// The layers that touch each value alone (ReLU, dropout) and flatten, which
// touches none: it only reinterprets the shape.
#include "tensor/nn/layers.hpp"

#include <algorithm>
#include <cstring>

#include "tensor/nn/cpu_kernels.hpp"
#include "tensor/nn/shared_math.hpp"

namespace troupe {

namespace {

using namespace cpu_kernels;

class relu_layer final : public layer {
public:
  using layer::layer;
  std::string describe() const override { return "relu"; }
  shape_t configure(const shape_t& input) override { return input; }
  bool is_relu() const override { return true; }
  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::relu;
    return d;
  }
  // Eigen array expressions: vectorised and branch-free (a data-dependent
  // branch here mispredicts on real activations).
  void forward(const tensor& x, tensor& y, const tensor*, bool) override {
    y.resize(x.shape());
    array_map(y) = const_array_map(x).cwiseMax(0.0f);
  }
  void backward(const tensor& x, const tensor& y, const tensor& dy, tensor* dx, const tensor*,
                tensor*) override {
    if (!dx)
      return;
    dx->resize(x.shape());
    array_map(*dx) = (const_array_map(y) > 0.0f).select(const_array_map(dy), 0.0f);
  }
};

class dropout_layer final : public layer {
public:
  dropout_layer(std::string name, float rate, uint64_t seed)
    : layer(std::move(name)), rate_(rate), seed_(seed), counter_(seed) {
    if (!(rate >= 0.0f && rate < 1.0f))
      throw shape_error(name_ + ": dropout rate must be in [0, 1)");
  }
  std::string describe() const override { return "dropout rate " + std::to_string(rate_); }
  shape_t configure(const shape_t& input) override {
    per_example_ = static_cast<uint64_t>(num_elements(input));
    return input;
  }
  void skip_training_steps(uint64_t steps, int64_t batch) override {
    counter_ = shared::dropout_after_steps(seed_, steps,
                                           static_cast<uint64_t>(batch) * per_example_);
  }
  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::dropout;
    d.rate = rate_;
    d.seed = seed_;
    return d;
  }
  void forward(const tensor& x, tensor& y, const tensor*, bool training) override {
    y.resize(x.shape());
    training_ = training && rate_ > 0.0f;
    if (!training_) {
      std::memcpy(y.data(), x.data(), x.bytes());
      return;
    }
    mask_.resize(x.shape());
    // The masks a GPU worker draws too (shared_math.hpp): each 64-bit draw
    // decides two values.
    auto keep_below = shared::dropout_keep_below(rate_);
    float scale = 1.0f / (1.0f - rate_);
    for (size_t i = 0; i < x.size(); i += 2) {
      uint64_t draw = shared::dropout_draw(counter_, i / 2);
      for (size_t j = i; j < std::min(i + 2, x.size()); ++j) {
        mask_[j] = shared::dropout_mask(draw, static_cast<unsigned>(j - i), keep_below, scale);
        y[j] = x[j] * mask_[j];
      }
    }
    counter_ = shared::dropout_advance(counter_, x.size());
  }
  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx, const tensor*,
                tensor*) override {
    if (!dx)
      return;
    dx->resize(x.shape());
    if (training_)
      array_map(*dx) = const_array_map(dy) * const_array_map(mask_);
    else
      std::memcpy(dx->data(), dy.data(), dy.bytes());
  }

private:
  float rate_;
  uint64_t seed_;
  uint64_t counter_;
  uint64_t per_example_ = 0; // values of one example at this layer
  bool training_ = false;
  tensor mask_;
};

class flatten_layer final : public layer {
public:
  using layer::layer;
  std::string describe() const override { return "flatten"; }
  shape_t configure(const shape_t& input) override { return {num_elements(input)}; }
  bool is_view() const override { return true; }
  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::flatten;
    return d;
  }
  void forward(const tensor&, tensor&, const tensor*, bool) override {}
  void backward(const tensor&, const tensor&, const tensor&, tensor*, const tensor*,
                tensor*) override {}
};

} // namespace

std::unique_ptr<layer> make_relu(std::string name) {
  return std::make_unique<relu_layer>(std::move(name));
}

std::unique_ptr<layer> make_dropout(std::string name, float rate, uint64_t seed) {
  return std::make_unique<dropout_layer>(std::move(name), rate, seed);
}

std::unique_ptr<layer> make_flatten(std::string name) {
  return std::make_unique<flatten_layer>(std::move(name));
}

} // namespace troupe
