#include "tensor/layers.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <Eigen/Core>

#include "tensor/error.hpp"

namespace troupe {

namespace {

using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_map = Eigen::Map<row_matrix>;
using const_matrix_map = Eigen::Map<const row_matrix>;

Eigen::Map<Eigen::ArrayXf> array_map(tensor& t) {
  return {t.data(), static_cast<Eigen::Index>(t.size())};
}

Eigen::Map<const Eigen::ArrayXf> const_array_map(const tensor& t) {
  return {t.data(), static_cast<Eigen::Index>(t.size())};
}

int64_t batch_of(const tensor& x, int64_t per_example) {
  if (per_example <= 0 || x.size() % static_cast<size_t>(per_example) != 0)
    throw shape_error("a batch of " + std::to_string(x.size()) + " values does not divide into "
                      "examples of " + std::to_string(per_example));
  return static_cast<int64_t>(x.size()) / per_example;
}

std::string shape_text(const shape_t& s) {
  return to_string(s);
}

// Padding before the first element so that SAME keeps ceil(input / stride).
int64_t pad_before(int64_t input, int64_t kernel, int64_t stride, padding pad) {
  if (pad == padding::valid)
    return 0;
  auto out = conv_output_size(input, kernel, stride, pad);
  auto total = std::max<int64_t>((out - 1) * stride + kernel - input, 0);
  return total / 2;
}

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

  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx,
                const tensor* params, tensor* grads) override {
    auto batch = batch_of(x, in_);
    const_matrix_map xv(x.data(), batch, in_);
    const_matrix_map dyv(dy.data(), batch, units_);
    grads[0].resize({in_, units_});
    grads[1].resize({units_});
    matrix_map(grads[0].data(), in_, units_).noalias() = xv.transpose() * dyv;
    Eigen::Map<Eigen::RowVectorXf>(grads[1].data(), units_).noalias() = dyv.colwise().sum();
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

class conv2d_layer final : public layer {
public:
  conv2d_layer(std::string name, int64_t filters, int64_t kh, int64_t kw, int64_t stride,
               padding pad, initializer w, initializer b)
    : layer(std::move(name)), filters_(filters), kh_(kh), kw_(kw), stride_(stride), pad_(pad),
      w_init_(w), b_init_(b) {
    if (filters <= 0 || kh <= 0 || kw <= 0 || stride <= 0)
      throw shape_error(name_ + ": conv2d needs filters, kernel and stride >= 1");
  }

  std::string describe() const override {
    return "conv2d " + std::to_string(kh_) + "x" + std::to_string(kw_) + "x"
           + std::to_string(c_) + "x" + std::to_string(filters_) + " stride "
           + std::to_string(stride_) + (pad_ == padding::same ? " SAME" : " VALID") + " -> "
           + shape_text({oh_, ow_, filters_});
  }

  shape_t configure(const shape_t& input) override {
    if (input.size() != 3)
      throw shape_error(name_ + ": conv2d needs [height, width, channels] inputs, got "
                        + shape_text(input) + " (put it before any flatten or dense layer)");
    h_ = input[0];
    w_ = input[1];
    c_ = input[2];
    oh_ = conv_output_size(h_, kh_, stride_, pad_);
    ow_ = conv_output_size(w_, kw_, stride_, pad_);
    if (oh_ <= 0 || ow_ <= 0)
      throw shape_error(name_ + ": a " + std::to_string(kh_) + "x" + std::to_string(kw_)
                        + " VALID kernel does not fit the " + shape_text(input) + " input");
    return {oh_, ow_, filters_};
  }

  std::vector<variable_spec> variables() const override {
    return {{name_ + "/weights", {kh_, kw_, c_, filters_}, w_init_},
            {name_ + "/biases", {filters_}, b_init_}};
  }

  // The batch is processed in chunks whose im2col rows fit in cache: each
  // chunk is unfolded, multiplied, and (backward) unfolded again rather than
  // kept, which trades a cheap in-cache recomputation for a round trip of the
  // whole unfolded batch (63 MB for the seeds' conv2 at batch 100) to memory.
  void forward(const tensor& x, tensor& y, const tensor* params, bool) override {
    batch_ = batch_of(x, h_ * w_ * c_);
    auto k = kh_ * kw_ * c_;
    y.resize({batch_, oh_, ow_, filters_});
    const_matrix_map kernel(params[0].data(), k, filters_);
    Eigen::Map<const Eigen::RowVectorXf> bias(params[1].data(), filters_);
    for (int64_t first = 0; first < batch_; first += chunk()) {
      auto count = std::min(chunk(), batch_ - first);
      auto rows = count * oh_ * ow_;
      im2col(x, first, count);
      matrix_map yv(y.data() + first * oh_ * ow_ * filters_, rows, filters_);
      yv.noalias() = const_matrix_map(col_.data(), rows, k) * kernel;
      yv.rowwise() += bias;
    }
  }

  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx,
                const tensor* params, tensor* grads) override {
    auto k = kh_ * kw_ * c_;
    grads[0].resize({kh_, kw_, c_, filters_});
    grads[1].resize({filters_});
    matrix_map dkernel(grads[0].data(), k, filters_);
    dkernel.setZero();
    const_matrix_map kernel(params[0].data(), k, filters_);
    Eigen::Map<Eigen::RowVectorXf>(grads[1].data(), filters_).noalias()
      = const_matrix_map(dy.data(), batch_ * oh_ * ow_, filters_).colwise().sum();
    if (dx) {
      dx->resize(x.shape());
      dx->fill(0.0f);
    }
    for (int64_t first = 0; first < batch_; first += chunk()) {
      auto count = std::min(chunk(), batch_ - first);
      auto rows = count * oh_ * ow_;
      const_matrix_map dyv(dy.data() + first * oh_ * ow_ * filters_, rows, filters_);
      im2col(x, first, count);
      dkernel.noalias() += const_matrix_map(col_.data(), rows, k).transpose() * dyv;
      if (!dx)
        continue;
      matrix_map(col_.data(), rows, k).noalias() = dyv * kernel.transpose();
      col2im(*dx, first, count);
    }
  }

private:
  // Examples per chunk: about 2 MB of unfolded rows, at least one example.
  int64_t chunk() const {
    auto per_example = oh_ * ow_ * kh_ * kw_ * c_ * static_cast<int64_t>(sizeof(float));
    return std::max<int64_t>(1, (int64_t{2} << 20) / std::max<int64_t>(1, per_example));
  }

  // Each output position's receptive field as one row: [count*oh*ow, kh*kw*c].
  // Runs of a kernel row that fall inside the image are copied at once.
  void im2col(const tensor& x, int64_t first, int64_t count) {
    auto k = kh_ * kw_ * c_;
    col_.resize({count * oh_ * ow_, k});
    auto top = pad_before(h_, kh_, stride_, pad_);
    auto left = pad_before(w_, kw_, stride_, pad_);
    float* out = col_.data();
    for (int64_t b = first; b < first + count; ++b) {
      const float* img = x.data() + b * h_ * w_ * c_;
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          auto x0 = ox * stride_ - left;
          auto lo = std::max<int64_t>(0, -x0);             // first kx inside
          auto hi = std::min<int64_t>(kw_, w_ - x0);       // one past the last
          for (int64_t ky = 0; ky < kh_; ++ky, out += kw_ * c_) {
            auto iy = oy * stride_ - top + ky;
            if (iy < 0 || iy >= h_ || hi <= lo) {
              std::fill(out, out + kw_ * c_, 0.0f);
              continue;
            }
            std::fill(out, out + lo * c_, 0.0f);
            std::memcpy(out + lo * c_, img + (iy * w_ + x0 + lo) * c_,
                        static_cast<size_t>((hi - lo) * c_) * sizeof(float));
            std::fill(out + hi * c_, out + kw_ * c_, 0.0f);
          }
        }
    }
  }

  // The adjoint of im2col: adds each row's entries back onto the input.
  void col2im(tensor& dx, int64_t first, int64_t count) const {
    auto top = pad_before(h_, kh_, stride_, pad_);
    auto left = pad_before(w_, kw_, stride_, pad_);
    const float* in = col_.data();
    for (int64_t b = first; b < first + count; ++b) {
      float* img = dx.data() + b * h_ * w_ * c_;
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          auto x0 = ox * stride_ - left;
          auto lo = std::max<int64_t>(0, -x0);
          auto hi = std::min<int64_t>(kw_, w_ - x0);
          for (int64_t ky = 0; ky < kh_; ++ky, in += kw_ * c_) {
            auto iy = oy * stride_ - top + ky;
            if (iy < 0 || iy >= h_ || hi <= lo)
              continue;
            float* dst = img + (iy * w_ + x0 + lo) * c_;
            const float* src = in + lo * c_;
            for (int64_t i = 0, n = (hi - lo) * c_; i < n; ++i)
              dst[i] += src[i];
          }
        }
    }
  }

  int64_t filters_, kh_, kw_, stride_;
  padding pad_;
  initializer w_init_, b_init_;
  int64_t h_ = 0, w_ = 0, c_ = 0, oh_ = 0, ow_ = 0, batch_ = 0;
  tensor col_;  // one chunk of unfolded rows (or their gradient)
};

class max_pool_layer final : public layer {
public:
  max_pool_layer(std::string name, int64_t size, int64_t stride, padding pad)
    : layer(std::move(name)), size_(size), stride_(stride), pad_(pad) {
    if (size <= 0 || stride <= 0)
      throw shape_error(name_ + ": max_pool needs size and stride >= 1");
  }

  std::string describe() const override {
    return "max_pool " + std::to_string(size_) + "x" + std::to_string(size_) + " stride "
           + std::to_string(stride_) + " -> " + shape_text({oh_, ow_, c_});
  }

  shape_t configure(const shape_t& input) override {
    if (input.size() != 3)
      throw shape_error(name_ + ": max_pool needs [height, width, channels] inputs, got "
                        + shape_text(input));
    h_ = input[0];
    w_ = input[1];
    c_ = input[2];
    oh_ = conv_output_size(h_, size_, stride_, pad_);
    ow_ = conv_output_size(w_, size_, stride_, pad_);
    if (oh_ <= 0 || ow_ <= 0)
      throw shape_error(name_ + ": the pooling window does not fit the " + shape_text(input)
                        + " input");
    return {oh_, ow_, c_};
  }

  void forward(const tensor& x, tensor& y, const tensor*, bool) override {
    auto batch = batch_of(x, h_ * w_ * c_);
    y.resize({batch, oh_, ow_, c_});
    argmax_.resize(y.size());
    if (size_ == 2 && stride_ == 2 && h_ % 2 == 0 && w_ % 2 == 0) {
      forward_2x2(x, y, batch);
      return;
    }
    auto top = pad_before(h_, size_, stride_, pad_);
    auto left = pad_before(w_, size_, stride_, pad_);
    size_t o = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox)
          for (int64_t ch = 0; ch < c_; ++ch, ++o) {
            float best = -std::numeric_limits<float>::infinity();
            int64_t best_at = -1;
            for (int64_t ky = 0; ky < size_; ++ky) {
              auto iy = oy * stride_ - top + ky;
              if (iy < 0 || iy >= h_)
                continue;
              for (int64_t kx = 0; kx < size_; ++kx) {
                auto ix = ox * stride_ - left + kx;
                if (ix < 0 || ix >= w_)
                  continue;
                auto at = ((b * h_ + iy) * w_ + ix) * c_ + ch;
                if (best_at < 0 || x[at] > best) {
                  best = x[at];
                  best_at = at;
                }
              }
            }
            y[o] = best;
            argmax_[o] = best_at;
          }
  }

  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx, const tensor*,
                tensor*) override {
    if (!dx)
      return;
    dx->resize(x.shape());
    dx->fill(0.0f);
    for (size_t o = 0; o < argmax_.size(); ++o)
      (*dx)[argmax_[o]] += dy[o];
  }

private:
  // The common case (2x2 windows, stride 2, even sizes: no padding either
  // way) without bounds checks, one output row of channels at a time.
  void forward_2x2(const tensor& x, tensor& y, int64_t batch) {
    size_t o = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          int64_t at[4];
          at[0] = ((b * h_ + 2 * oy) * w_ + 2 * ox) * c_;
          at[1] = at[0] + c_;
          at[2] = at[0] + w_ * c_;
          at[3] = at[2] + c_;
          for (int64_t ch = 0; ch < c_; ++ch, ++o) {
            int64_t best_at = at[0] + ch;
            float best = x[best_at];
            for (int k = 1; k < 4; ++k)
              if (x[at[k] + ch] > best) {
                best = x[at[k] + ch];
                best_at = at[k] + ch;
              }
            y[o] = best;
            argmax_[o] = best_at;
          }
        }
  }

  int64_t size_, stride_;
  padding pad_;
  int64_t h_ = 0, w_ = 0, c_ = 0, oh_ = 0, ow_ = 0;
  std::vector<int64_t> argmax_;
};

class relu_layer final : public layer {
public:
  using layer::layer;
  std::string describe() const override { return "relu"; }
  shape_t configure(const shape_t& input) override { return input; }
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
    : layer(std::move(name)), rate_(rate), rng_(seed) {
    if (!(rate >= 0.0f && rate < 1.0f))
      throw shape_error(name_ + ": dropout rate must be in [0, 1)");
  }
  std::string describe() const override { return "dropout rate " + std::to_string(rate_); }
  shape_t configure(const shape_t& input) override { return input; }
  void forward(const tensor& x, tensor& y, const tensor*, bool training) override {
    y.resize(x.shape());
    training_ = training && rate_ > 0.0f;
    if (!training_) {
      std::memcpy(y.data(), x.data(), x.bytes());
      return;
    }
    mask_.resize(x.shape());
    std::bernoulli_distribution keep(1.0 - rate_);
    float scale = 1.0f / (1.0f - rate_);
    for (size_t i = 0; i < x.size(); ++i) {
      mask_[i] = keep(rng_) ? scale : 0.0f;
      y[i] = x[i] * mask_[i];
    }
  }
  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx, const tensor*,
                tensor*) override {
    if (!dx)
      return;
    dx->resize(x.shape());
    for (size_t i = 0; i < dy.size(); ++i)
      (*dx)[i] = training_ ? dy[i] * mask_[i] : dy[i];
  }

private:
  float rate_;
  std::mt19937_64 rng_;
  bool training_ = false;
  tensor mask_;
};

class flatten_layer final : public layer {
public:
  using layer::layer;
  std::string describe() const override { return "flatten"; }
  shape_t configure(const shape_t& input) override { return {num_elements(input)}; }
  bool is_view() const override { return true; }
  void forward(const tensor&, tensor&, const tensor*, bool) override {}
  void backward(const tensor&, const tensor&, const tensor&, tensor*, const tensor*,
                tensor*) override {}
};

} // namespace

int64_t conv_output_size(int64_t input, int64_t kernel, int64_t stride, padding pad) {
  if (pad == padding::same)
    return (input + stride - 1) / stride;
  return input >= kernel ? (input - kernel) / stride + 1 : 0;
}

std::unique_ptr<layer> make_dense(std::string name, int64_t units, initializer weights,
                                  initializer biases) {
  return std::make_unique<dense_layer>(std::move(name), units, weights, biases);
}

std::unique_ptr<layer> make_conv2d(std::string name, int64_t filters, int64_t kernel_h,
                                   int64_t kernel_w, int64_t stride, padding pad,
                                   initializer weights, initializer biases) {
  return std::make_unique<conv2d_layer>(std::move(name), filters, kernel_h, kernel_w, stride,
                                        pad, weights, biases);
}

std::unique_ptr<layer> make_max_pool(std::string name, int64_t size, int64_t stride,
                                     padding pad) {
  return std::make_unique<max_pool_layer>(std::move(name), size, stride, pad);
}

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
