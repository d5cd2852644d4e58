// 2-D convolution on the CPU (im2col + GEMM, or a direct kernel for small
// receptive fields), and the window geometry it shares with pooling.
#include "tensor/nn/layers.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "tensor/nn/cpu_kernels.hpp"

namespace troupe {

namespace {

using namespace cpu_kernels;

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
    std::tie(h_, w_, c_, oh_, ow_) = window_over(input, kh_, kw_, stride_, pad_, name_ + ": conv2d",
                                                 " (put it before any flatten or dense layer)");
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

  // Calls f(block_count<P>, oy, ox) over the output pixels, P = 2
  // horizontally adjacent ones at a time, the odd one at a row's end alone.
  template <class F>
  void for_pixel_pairs(F f) const {
    for (int64_t oy = 0; oy < oh_; ++oy) {
      int64_t ox = 0;
      for (; ox + 2 <= ow_; ox += 2)
        f(block_count<2>{}, oy, ox);
      if (ox < ow_)
        f(block_count<1>{}, oy, ox);
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
    for_pixel_pairs([&](auto pixels, int64_t oy, int64_t ox) {
      direct_forward_pixels<N, decltype(pixels)::value>(kernel, bias, y, f0, oy, ox);
    });
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
    for_pixel_pairs([&](auto pixels, int64_t oy, int64_t ox) {
      direct_weight_gradient_pixels<N, decltype(pixels)::value>(dy, dkernel, db, f0, oy, ox);
    });
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

std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>
window_over(const shape_t& input, int64_t kernel_h, int64_t kernel_w, int64_t stride, padding pad,
            const std::string& what, const std::string& hint) {
  if (input.size() != 3)
    throw shape_error(what + " needs [height, width, channels] inputs, got " + to_string(input)
                      + hint);
  return {input[0], input[1], input[2], conv_output_size(input[0], kernel_h, stride, pad),
          conv_output_size(input[1], kernel_w, stride, pad)};
}

std::unique_ptr<layer> make_conv2d(std::string name, int64_t filters, int64_t kernel_h,
                                   int64_t kernel_w, int64_t stride, padding pad,
                                   initializer weights, initializer biases) {
  return std::make_unique<conv2d_layer>(std::move(name), filters, kernel_h, kernel_w, stride, pad,
                                        weights, biases);
}

} // namespace troupe
