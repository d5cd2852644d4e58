#pragma once
// Layers for CPU training (Eigen inside .cpp files). Each layer maps a batch
// [batch, per-example shape...] to another, knows its variables (named
// "<layer>/weights", "<layer>/biases" like TF) and computes its backward
// pass. Images are NHWC; conv kernels are [kh, kw, in, out] as in TF.
// Layers keep scratch buffers between steps, so a step allocates nothing
// once shapes are stable.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/core/tensor.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

class layer {
public:
  explicit layer(std::string name) : name_(std::move(name)) {}
  virtual ~layer() = default;

  const std::string& name() const noexcept { return name_; }
  virtual std::string describe() const = 0;

  /// Fixes the per-example input shape and returns the output shape; throws
  /// shape_error naming the layer when the input does not fit.
  virtual shape_t configure(const shape_t& input) = 0;

  /// The variables of this layer (after configure).
  virtual std::vector<variable_spec> variables() const { return {}; }

  /// True for layers that only reinterpret the shape (flatten): the model
  /// passes their input on unchanged, no data moves.
  virtual bool is_view() const { return false; }

  /// Its kind and parameters (shapes and variables are the model's to fill).
  virtual layer_desc desc() const = 0;

  /// True for ReLU, which the model may fold into the layer after it.
  /// A worker restored from a checkpoint continues its random streams as if
  /// it had taken `steps` training steps of `batch` examples (dropout).
  virtual void skip_training_steps(uint64_t /*steps*/, int64_t /*batch*/) {}
  virtual bool is_relu() const { return false; }

  /// Asks this layer to apply a ReLU to its input itself (max-pool can:
  /// max(relu(x)) == relu(max(x)), on a quarter of the values). Returns false
  /// where it cannot; on true the model skips the preceding ReLU layer.
  virtual bool fuse_input_relu() { return false; }

  /// y = layer(x) for a batch x [batch, input...] (any shape with that many
  /// values per example); params: this layer's variables in variables() order.
  virtual void forward(const tensor& x, tensor& y, const tensor* params, bool training) = 0;

  /// Given dL/dy, writes dL/dx (unless dx is null) and dL/dparams into grads.
  /// Must follow the forward pass of the same batch.
  virtual void backward(const tensor& x, const tensor& y, const tensor& dy, tensor* dx,
                        const tensor* params, tensor* grads) = 0;

protected:
  std::string name_;
};

/// y = x W + b; x is flattened per example.
std::unique_ptr<layer> make_dense(std::string name, int64_t units, initializer weights,
                                  initializer biases);

/// 2-D convolution, NHWC, kernel [kh, kw, in, filters], via im2col + GEMM.
std::unique_ptr<layer> make_conv2d(std::string name, int64_t filters, int64_t kernel_h,
                                   int64_t kernel_w, int64_t stride, padding pad,
                                   initializer weights, initializer biases);

/// Max pooling over size x size windows.
std::unique_ptr<layer> make_max_pool(std::string name, int64_t size, int64_t stride, padding pad);

std::unique_ptr<layer> make_relu(std::string name);

/// Drops each value with probability `rate` while training (scaling the rest
/// by 1 / (1 - rate)); the identity at evaluation. Masks come from a seeded
/// counter, so a run is reproducible.
std::unique_ptr<layer> make_dropout(std::string name, float rate, uint64_t seed);

/// [h, w, c] -> [h * w * c]; a view: no data moves.
std::unique_ptr<layer> make_flatten(std::string name);

/// Output size of a convolution or pooling along one axis.
int64_t conv_output_size(int64_t input, int64_t kernel, int64_t stride, padding pad);

/// A window of kernel_h x kernel_w moved by `stride` over an [height, width,
/// channels] input: {height, width, channels, output height, output width}
/// (an output size below 1: the window does not fit). Another rank is a
/// shape_error: "<what> needs [height, width, channels] inputs, got
/// <input><hint>".
std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>
window_over(const shape_t& input, int64_t kernel_h, int64_t kernel_w, int64_t stride, padding pad,
            const std::string& what, const std::string& hint = "");

/// Padding before the first row or column: SAME keeps ceil(input / stride)
/// outputs and pads like TF (the extra one after); VALID pads nothing.
int64_t pad_before(int64_t input, int64_t kernel, int64_t stride, padding pad);

} // namespace troupe
