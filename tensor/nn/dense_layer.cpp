// The fully connected layer on the CPU: y = x W + b with Eigen GEMMs.
#include "tensor/nn/layers.hpp"

#include "tensor/nn/cpu_kernels.hpp"

namespace troupe {

namespace {

using namespace cpu_kernels;

class dense_layer final : public layer {
public:
  dense_layer(std::string name, int64_t units, initializer w, initializer b)
    : layer(std::move(name)), units_(units), w_init_(w), b_init_(b) {
    if (units <= 0)
      throw shape_error(name_ + ": dense needs units >= 1");
  }

  std::string describe() const override {
    return "dense " + std::to_string(in_) + " -> " + std::to_string(units_);
  }

  shape_t configure(const shape_t& input) override {
    in_ = num_elements(input);
    return {units_};
  }

  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::dense;
    d.units = units_;
    return d;
  }

  std::vector<variable_spec> variables() const override {
    return {{name_ + "/weights", {in_, units_}, w_init_}, {name_ + "/biases", {units_}, b_init_}};
  }

  void forward(const tensor& x, tensor& y, const tensor* params, bool) override {
    auto batch = batch_of(x, in_);
    y.resize({batch, units_});
    const_matrix_map xv(x.data(), batch, in_);
    const_matrix_map w(params[0].data(), in_, units_);
    matrix_map yv(y.data(), batch, units_);
    yv.noalias() = xv * w;
    yv.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(params[1].data(), units_);
  }

  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx, const tensor* params,
                tensor* grads) override {
    auto batch = batch_of(x, in_);
    const_matrix_map xv(x.data(), batch, in_);
    const_matrix_map dyv(dy.data(), batch, units_);
    grads[0].resize({in_, units_});
    grads[1].resize({units_});
    matrix_map(grads[0].data(), in_, units_).noalias() = xv.transpose() * dyv;
    sum_rows_into(dyv, grads[1].data());
    if (dx) {
      dx->resize(x.shape());
      const_matrix_map w(params[0].data(), in_, units_);
      matrix_map(dx->data(), batch, in_).noalias() = dyv * w.transpose();
    }
  }

private:
  int64_t units_;
  int64_t in_ = 0;
  initializer w_init_, b_init_;
};

} // namespace

std::unique_ptr<layer> make_dense(std::string name, int64_t units, initializer weights,
                                  initializer biases) {
  return std::make_unique<dense_layer>(std::move(name), units, weights, biases);
}

} // namespace troupe
