#include "tensor/nn/layer_stack.hpp"

#include "tensor/core/error.hpp"

namespace troupe {

layer_stack::layer_stack(std::string owner, shape_t input,
                         std::vector<std::unique_ptr<layer>> layers)
  : owner_(std::move(owner)), layers_(std::move(layers)) {
  if (layers_.empty())
    throw shape_error(owner_ + ": a model needs at least one layer");
  auto shape = std::move(input);
  for (auto& l : layers_) {
    offsets_.push_back(vars_.size());
    shapes_.push_back(shape);
    shape = l->configure(shape);
    for (auto& v : l->variables())
      vars_.push_back(v);
  }
  offsets_.push_back(vars_.size());
  shapes_.push_back(shape);
  outputs_.resize(layers_.size());
  input_grads_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    skipped_.push_back(
      layers_[i]->is_view()
      || (layers_[i]->is_relu() && i + 1 < layers_.size() && layers_[i + 1]->fuse_input_relu()));
}

std::string layer_stack::describe() const {
  std::string out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    out += "  " + layers_[i]->name() + ": " + layers_[i]->describe() + "\n";
    for (size_t v = offsets_[i]; v < offsets_[i + 1]; ++v)
      out += "    " + vars_[v].name + " " + to_string(vars_[v].shape) + " ("
             + std::to_string(num_elements(vars_[v].shape)) + " values)\n";
  }
  return out;
}

std::vector<layer_desc> layer_stack::layers(size_t first_variable) const {
  std::vector<layer_desc> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto d = layers_[i]->desc();
    d.name = layers_[i]->name();
    d.input = shapes_[i];
    d.output = shapes_[i + 1];
    d.skipped = skipped_[i];
    d.first_variable = first_variable + offsets_[i];
    d.num_variables = offsets_[i + 1] - offsets_[i];
    out.push_back(std::move(d));
  }
  return out;
}

void layer_stack::skip_training_steps(uint64_t steps, int64_t batch) {
  for (auto& l : layers_)
    l->skip_training_steps(steps, batch);
}

void layer_stack::check_params(const tensor* params, size_t n) const {
  if (n != vars_.size())
    throw shape_error(owner_ + ": expected " + std::to_string(vars_.size()) + " parameters, got "
                      + std::to_string(n));
  for (size_t i = 0; i < vars_.size(); ++i)
    if (params[i].shape() != vars_[i].shape)
      throw shape_error(owner_ + ": " + vars_[i].name + " has shape " + to_string(params[i].shape())
                        + ", expected " + to_string(vars_[i].shape));
}

size_t layer_stack::first_compute_layer() const {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (!skipped_[i])
      return i;
  return 0;
}

const tensor& layer_stack::forward(const tensor* params, const tensor& input, bool training) {
  inputs_.assign(layers_.size(), nullptr);
  const tensor* current = &input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    inputs_[i] = current;
    if (skipped_[i])
      continue;
    layers_[i]->forward(*current, outputs_[i], params + offsets_[i], training);
    current = &outputs_[i];
  }
  return *current;
}

void layer_stack::backward(const tensor* params, const tensor& output_grad, tensor* grads,
                           tensor* input_grad) {
  const tensor* upstream = &output_grad;
  auto first = first_compute_layer();
  for (size_t i = layers_.size(); i-- > 0;) {
    if (skipped_[i])
      continue;
    // The first layer's input is the stack's: its gradient only where asked.
    tensor* dx = i == first ? input_grad : &input_grads_[i];
    layers_[i]->backward(*inputs_[i], outputs_[i], *upstream, dx, params + offsets_[i],
                         grads + offsets_[i]);
    if (dx)
      upstream = dx;
  }
}

} // namespace troupe
