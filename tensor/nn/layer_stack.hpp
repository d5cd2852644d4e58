#pragma once
// A configured stack of layers: their variables, the forward pass and the
// backward pass, as the sequential models (model.cpp) and the networks over
// an embedding layer (embedding_network.cpp) both run them. Layers that move
// no data (views, and ReLUs the next layer applies) are skipped.
#include <memory>
#include <string>
#include <vector>

#include "tensor/nn/layers.hpp"

namespace troupe {

class layer_stack {
public:
  /// Configures `layers` for examples of shape `input`; throws shape_error
  /// naming `owner` where there are none or they do not fit.
  layer_stack(std::string owner, shape_t input, std::vector<std::unique_ptr<layer>> layers);

  const std::vector<variable_spec>& variables() const noexcept { return vars_; }
  const shape_t& input_shape() const noexcept { return shapes_.front(); }
  const shape_t& output_shape() const noexcept { return shapes_.back(); }
  const layer& last() const { return *layers_.back(); }

  /// One line per layer and per variable, indented.
  std::string describe() const;
  /// The layers with their per-example shapes; variable indices are offset
  /// by `first_variable` (where the stack's variables start in its model's).
  std::vector<layer_desc> layers(size_t first_variable = 0) const;
  void skip_training_steps(uint64_t steps, int64_t batch);

  /// Throws shape_error naming `owner` unless params[0 .. n) have the
  /// variables' shapes.
  void check_params(const tensor* params, size_t n) const;

  /// The output of the stack for `input` [batch, input shape...]; params
  /// follow variables(). The result (and `input`) must live until backward.
  const tensor& forward(const tensor* params, const tensor& input, bool training);

  /// After forward: the gradient of every variable into grads (variables()
  /// order, resized as needed) and, unless null, dL/d(input) into
  /// input_grad, given dL/d(output).
  void backward(const tensor* params, const tensor& output_grad, tensor* grads, tensor* input_grad);

private:
  size_t first_compute_layer() const;

  std::string owner_;
  std::vector<std::unique_ptr<layer>> layers_;
  std::vector<variable_spec> vars_;
  std::vector<size_t> offsets_;       // first variable of each layer, then the count
  std::vector<shape_t> shapes_;       // per-example shape before each layer, then the output
  std::vector<bool> skipped_;         // views and fused ReLUs
  std::vector<const tensor*> inputs_; // of each layer, last forward pass
  std::vector<tensor> outputs_;       // of each layer
  std::vector<tensor> input_grads_;   // dL/d(input) of each layer
};

} // namespace troupe
