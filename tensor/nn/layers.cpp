#include "tensor/nn/layers.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "tensor/core/error.hpp"
#include "tensor/nn/shared_math.hpp"

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

// out = the sum of the rows of `rows`, added row by row: Eigen's colwise()
// sum picks its summation order by the destination's alignment, so the same
// gradient came out a few ulps apart in a reused buffer and a fresh one.
void sum_rows_into(const_matrix_map rows, float* out) {
  Eigen::Map<Eigen::RowVectorXf> sum(out, rows.cols());
  sum.setZero();
  for (Eigen::Index r = 0; r < rows.rows(); ++r)
    sum += rows.row(r);
}

int64_t batch_of(const tensor& x, int64_t per_example) {
  if (per_example <= 0 || x.size() % static_cast<size_t>(per_example) != 0)
    throw shape_error("a batch of " + std::to_string(x.size())
                      + " values does not divide into "
                        "examples of "
                      + std::to_string(per_example));
  return static_cast<int64_t>(x.size()) / per_example;
}

std::string shape_text(const shape_t& s) {
  return to_string(s);
}

// Eight floats (and eight ints), as the compiler's vector extension: AVX
// registers where the target has them, pairs of SSE registers otherwise.
typedef float lanes8 __attribute__((vector_size(32)));
typedef int32_t ints8 __attribute__((vector_size(32)));
typedef int8_t bytes8 __attribute__((vector_size(8)));
constexpr int64_t lane_width = 8;

lanes8 load(const float* p) {
  lanes8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store(float* p, lanes8 v) {
  std::memcpy(p, &v, sizeof v);
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
    return "conv2d " + std::to_string(kh_) + "x" + std::to_string(kw_) + "x" + std::to_string(c_)
           + "x" + std::to_string(filters_) + " stride " + std::to_string(stride_)
           + (pad_ == padding::same ? " SAME" : " VALID") + " -> "
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

  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::conv2d;
    d.filters = filters_;
    d.kernel_h = kh_;
    d.kernel_w = kw_;
    d.stride = stride_;
    d.pad = pad_;
    return d;
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
    y.resize({batch_, oh_, ow_, filters_});
    if (direct()) {
      for (int64_t b = 0; b < batch_; ++b) {
        pad_image(x, b);
        for_filter_blocks([&](auto lanes, int64_t f0) {
          direct_forward<decltype(lanes)::value>(params[0].data(), params[1].data(),
                                                 y.data() + b * oh_ * ow_ * filters_, f0);
        });
      }
      return;
    }
    auto k = kh_ * kw_ * c_;
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

  void backward(const tensor& x, const tensor&, const tensor& dy, tensor* dx, const tensor* params,
                tensor* grads) override {
    auto k = kh_ * kw_ * c_;
    grads[0].resize({kh_, kw_, c_, filters_});
    grads[1].resize({filters_});
    matrix_map dkernel(grads[0].data(), k, filters_);
    dkernel.setZero();
    const_matrix_map kernel(params[0].data(), k, filters_);
    if (direct()) {
      grads[1].fill(0.0f);
      for (int64_t b = 0; b < batch_; ++b) {
        pad_image(x, b);
        for_filter_blocks([&](auto lanes, int64_t f0) {
          direct_weight_gradient<decltype(lanes)::value>(dy.data() + b * oh_ * ow_ * filters_,
                                                         grads[0].data(), grads[1].data(), f0);
        });
      }
    } else {
      sum_rows_into(const_matrix_map(dy.data(), batch_ * oh_ * ow_, filters_), grads[1].data());
    }
    if (dx) {
      dx->resize(x.shape());
      dx->fill(0.0f);
    }
    if (direct() && !dx)
      return;
    for (int64_t first = 0; first < batch_; first += chunk()) {
      auto count = std::min(chunk(), batch_ - first);
      auto rows = count * oh_ * ow_;
      const_matrix_map dyv(dy.data() + first * oh_ * ow_ * filters_, rows, filters_);
      if (!direct()) {
        im2col(x, first, count);
        dkernel.noalias() += const_matrix_map(col_.data(), rows, k).transpose() * dyv;
      }
      if (!dx)
        continue;
      col_.resize({rows, k});
      matrix_map(col_.data(), rows, k).noalias() = dyv * kernel.transpose();
      col2im(*dx, first, count);
    }
  }

private:
  // A receptive field this small (the first layer of an image model: 5x5x1 =
  // 25 for the seeds' conv1) leaves GEMM too short an inner dimension to
  // amortise its packing (it ran at a sixth of the GEMM rate); a direct
  // kernel over a zero-padded copy of each image keeps a block of up to 32
  // output channels in registers instead and runs several times faster.
  bool direct() const { return filters_ % lane_width == 0 && kh_ * kw_ * c_ <= 64; }

  static constexpr int max_blocks = 4; // 32 channels: 4 accumulators per pixel

  template <int N>
  using block_count = std::integral_constant<int, N>;

  // Calls f(block_count<N>, first filter) over the filters in blocks of up
  // to max_blocks lanes8 each.
  template <class F>
  void for_filter_blocks(F f) const {
    int64_t f0 = 0;
    for (; f0 + max_blocks * lane_width <= filters_; f0 += max_blocks * lane_width)
      f(block_count<max_blocks>{}, f0);
    switch ((filters_ - f0) / lane_width) {
      case 3:
        f(block_count<3>{}, f0);
        break;
      case 2:
        f(block_count<2>{}, f0);
        break;
      case 1:
        f(block_count<1>{}, f0);
        break;
      default:
        break;
    }
  }

  // Copies example b into padded_ with the padding as zeros, so that every
  // output position reads a full kh x kw window without bounds checks.
  void pad_image(const tensor& x, int64_t b) {
    auto top = pad_before(h_, kh_, stride_, pad_);
    auto left = pad_before(w_, kw_, stride_, pad_);
    padded_h_ = (oh_ - 1) * stride_ + kh_;
    padded_w_ = (ow_ - 1) * stride_ + kw_;
    padded_.resize({padded_h_, padded_w_, c_});
    padded_.fill(0.0f);
    const float* img = x.data() + b * h_ * w_ * c_;
    auto x_lo = std::max<int64_t>(0, -left), x_hi = std::min(w_, padded_w_ - left);
    for (int64_t iy = std::max<int64_t>(0, -top); iy < std::min(h_, padded_h_ - top); ++iy)
      if (x_hi > x_lo)
        std::memcpy(padded_.data() + ((iy + top) * padded_w_ + x_lo + left) * c_,
                    img + (iy * w_ + x_lo) * c_,
                    static_cast<size_t>((x_hi - x_lo) * c_) * sizeof(float));
  }

  // y[pixel, f0 .. f0 + 8N) for one example from padded_, P horizontally
  // adjacent pixels at a time so that each kernel load serves P of them.
  template <int N>
  void direct_forward(const float* kernel, const float* bias, float* y, int64_t f0) const {
    for (int64_t oy = 0; oy < oh_; ++oy) {
      int64_t ox = 0;
      for (; ox + 2 <= ow_; ox += 2)
        direct_forward_pixels<N, 2>(kernel, bias, y, f0, oy, ox);
      if (ox < ow_)
        direct_forward_pixels<N, 1>(kernel, bias, y, f0, oy, ox);
    }
  }

  template <int N, int P>
  void direct_forward_pixels(const float* kernel, const float* bias, float* y, int64_t f0,
                             int64_t oy, int64_t ox) const {
    const int64_t row_len = kw_ * c_, step = stride_ * c_;
    lanes8 acc[P][N];
    for (int v = 0; v < N; ++v) {
      auto b = load(bias + f0 + v * lane_width);
      for (int p = 0; p < P; ++p)
        acc[p][v] = b;
    }
    for (int64_t ky = 0; ky < kh_; ++ky) {
      const float* in = padded_.data() + ((oy * stride_ + ky) * padded_w_ + ox * stride_) * c_;
      const float* w = kernel + ky * row_len * filters_ + f0;
      for (int64_t t = 0; t < row_len; ++t, w += filters_)
        for (int v = 0; v < N; ++v) {
          auto wv = load(w + v * lane_width);
          for (int p = 0; p < P; ++p)
            acc[p][v] += in[t + p * step] * wv;
        }
    }
    for (int p = 0; p < P; ++p) {
      float* out = y + (oy * ow_ + ox + p) * filters_ + f0;
      for (int v = 0; v < N; ++v)
        store(out + v * lane_width, acc[p][v]);
    }
  }

  // Adds one example's contribution to dkernel and dbias for filters
  // f0 .. f0 + 8N; dkernel (kh*kw*c x filters floats) stays in L1 and each
  // of its loads and stores serves two pixels.
  template <int N>
  void direct_weight_gradient(const float* dy, float* dkernel, float* dbias, int64_t f0) const {
    lanes8 db[N];
    for (int v = 0; v < N; ++v)
      db[v] = lanes8{};
    for (int64_t oy = 0; oy < oh_; ++oy) {
      int64_t ox = 0;
      for (; ox + 2 <= ow_; ox += 2)
        direct_weight_gradient_pixels<N, 2>(dy, dkernel, db, f0, oy, ox);
      if (ox < ow_)
        direct_weight_gradient_pixels<N, 1>(dy, dkernel, db, f0, oy, ox);
    }
    for (int v = 0; v < N; ++v)
      store(dbias + f0 + v * lane_width, load(dbias + f0 + v * lane_width) + db[v]);
  }

  template <int N, int P>
  void direct_weight_gradient_pixels(const float* dy, float* dkernel, lanes8* db, int64_t f0,
                                     int64_t oy, int64_t ox) const {
    const int64_t row_len = kw_ * c_, step = stride_ * c_;
    lanes8 d[P][N];
    for (int p = 0; p < P; ++p) {
      const float* g = dy + (oy * ow_ + ox + p) * filters_ + f0;
      for (int v = 0; v < N; ++v) {
        d[p][v] = load(g + v * lane_width);
        db[v] += d[p][v];
      }
    }
    for (int64_t ky = 0; ky < kh_; ++ky) {
      const float* in = padded_.data() + ((oy * stride_ + ky) * padded_w_ + ox * stride_) * c_;
      float* w = dkernel + ky * row_len * filters_ + f0;
      for (int64_t t = 0; t < row_len; ++t, w += filters_)
        for (int v = 0; v < N; ++v) {
          auto sum = load(w + v * lane_width);
          for (int p = 0; p < P; ++p)
            sum += in[t + p * step] * d[p][v];
          store(w + v * lane_width, sum);
        }
    }
  }

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
          auto lo = std::max<int64_t>(0, -x0);       // first kx inside
          auto hi = std::min<int64_t>(kw_, w_ - x0); // one past the last
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
  tensor col_;    // one chunk of unfolded rows (or their gradient)
  tensor padded_; // one zero-padded example (direct path)
  int64_t padded_h_ = 0, padded_w_ = 0;
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
    tiled_ = size_ == 2 && stride_ == 2 && h_ % 2 == 0 && w_ % 2 == 0;
    return {oh_, ow_, c_};
  }

  layer_desc desc() const override {
    layer_desc d;
    d.type = layer_desc::kind::max_pool;
    d.kernel_h = d.kernel_w = size_;
    d.stride = stride_;
    d.pad = pad_;
    d.applies_input_relu = relu_;
    return d;
  }

  void forward(const tensor& x, tensor& y, const tensor*, bool) override {
    auto batch = batch_of(x, h_ * w_ * c_);
    y.resize({batch, oh_, ow_, c_});
    if (tiled_) {
      forward_2x2(x, y, batch);
      return;
    }
    argmax_.resize(y.size());
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
            if (relu_ && !(best > 0.0f)) {
              best = 0.0f;
              best_at = no_gradient;
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
    if (tiled_) {
      backward_2x2(dy, *dx);
      return;
    }
    dx->fill(0.0f);
    for (size_t o = 0; o < argmax_.size(); ++o)
      if (argmax_[o] != no_gradient)
        (*dx)[argmax_[o]] += dy[o];
  }

  bool fuse_input_relu() override {
    relu_ = true;
    return true;
  }

private:
  // The common case (2x2 windows, stride 2, even sizes: no padding either
  // way, no overlap): eight channels at a time, remembering which of the
  // four window positions held the maximum (4: none, a fused ReLU's zero).
  void forward_2x2(const tensor& x, tensor& y, int64_t batch) {
    window_max_.resize(y.size());
    size_t o = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          const float* at[4];
          at[0] = x.data() + ((b * h_ + 2 * oy) * w_ + 2 * ox) * c_;
          at[1] = at[0] + c_;
          at[2] = at[0] + w_ * c_;
          at[3] = at[2] + c_;
          int64_t ch = 0;
          for (; ch + lane_width <= c_; ch += lane_width, o += lane_width) {
            lanes8 best = load(at[0] + ch);
            ints8 which = ints8{};
            for (int k = 1; k < 4; ++k) {
              lanes8 v = load(at[k] + ch);
              auto greater = v > best;
              best = greater ? v : best;
              which = greater ? ints8{} + k : which;
            }
            if (relu_) {
              auto positive = best > lanes8{};
              best = positive ? best : lanes8{};
              which = positive ? which : ints8{} + no_window;
            }
            store(y.data() + o, best);
            bytes8 w8 = __builtin_convertvector(which, bytes8);
            std::memcpy(window_max_.data() + o, &w8, sizeof w8);
          }
          for (; ch < c_; ++ch, ++o) {
            float best = at[0][ch];
            int8_t which = 0;
            for (int8_t k = 1; k < 4; ++k)
              if (at[k][ch] > best) {
                best = at[k][ch];
                which = k;
              }
            if (relu_ && !(best > 0.0f)) {
              best = 0.0f;
              which = no_window;
            }
            y[o] = best;
            window_max_[o] = which;
          }
        }
  }

  // Every input value is written exactly once (dy at its window's maximum,
  // 0 elsewhere), so no zero-fill pass is needed first.
  void backward_2x2(const tensor& dy, tensor& dx) const {
    size_t o = 0;
    int64_t batch = static_cast<int64_t>(dy.size()) / (oh_ * ow_ * c_);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          float* at[4];
          at[0] = dx.data() + ((b * h_ + 2 * oy) * w_ + 2 * ox) * c_;
          at[1] = at[0] + c_;
          at[2] = at[0] + w_ * c_;
          at[3] = at[2] + c_;
          int64_t ch = 0;
          for (; ch + lane_width <= c_; ch += lane_width, o += lane_width) {
            bytes8 w8;
            std::memcpy(&w8, window_max_.data() + o, sizeof w8);
            ints8 which = __builtin_convertvector(w8, ints8);
            lanes8 g = load(dy.data() + o);
            for (int k = 0; k < 4; ++k)
              store(at[k] + ch, which == k ? g : lanes8{});
          }
          for (; ch < c_; ++ch, ++o)
            for (int k = 0; k < 4; ++k)
              at[k][ch] = window_max_[o] == k ? dy[o] : 0.0f;
        }
  }

  static constexpr int8_t no_window = 4;
  static constexpr int64_t no_gradient = -1; // a window whose fused ReLU output is 0

  int64_t size_, stride_;
  padding pad_;
  int64_t h_ = 0, w_ = 0, c_ = 0, oh_ = 0, ow_ = 0;
  bool tiled_ = false;             // 2x2 windows, stride 2, even sizes: no overlap, no padding
  bool relu_ = false;              // applies the preceding ReLU itself
  std::vector<int64_t> argmax_;    // input index of each output's maximum
  std::vector<int8_t> window_max_; // tiled: its position in the 2x2 window
};

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

int64_t pad_before(int64_t input, int64_t kernel, int64_t stride, padding pad) {
  if (pad == padding::valid)
    return 0;
  auto out = conv_output_size(input, kernel, stride, pad);
  auto total = std::max<int64_t>((out - 1) * stride + kernel - input, 0);
  return total / 2;
}

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
  return std::make_unique<conv2d_layer>(std::move(name), filters, kernel_h, kernel_w, stride, pad,
                                        weights, biases);
}

std::unique_ptr<layer> make_max_pool(std::string name, int64_t size, int64_t stride, padding pad) {
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
