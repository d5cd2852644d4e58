// Max pooling on the CPU, with a vectorised path for 2x2 windows of stride 2.
#include "tensor/nn/layers.hpp"

#include <array>
#include <cstring>
#include <limits>

#include "tensor/nn/cpu_kernels.hpp"

namespace troupe {

namespace {

using namespace cpu_kernels;

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
    std::tie(h_, w_, c_, oh_, ow_) = window_over(input, size_, size_, stride_, pad_,
                                                 name_ + ": max_pool");
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
            put(y, argmax_, o, best, best_at, no_gradient);
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
  // Output o and where its maximum came from; a fused ReLU makes a maximum
  // that is not positive 0, from nowhere (`none`).
  template <class Index>
  void put(tensor& y, std::vector<Index>& from, size_t o, float best, Index at, Index none) const {
    bool cut = relu_ && !(best > 0.0f);
    y[o] = cut ? 0.0f : best;
    from[o] = cut ? none : at;
  }

  // Calls f(at, o) for each output pixel of the tiled case, in order: `at`
  // channel 0 of the four positions of its 2x2 window in `base` (the input
  // or its gradient), o the output index of its channel 0.
  template <class T, class F>
  void for_each_window(T* base, int64_t batch, F f) const {
    size_t o = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox, o += static_cast<size_t>(c_)) {
          T* first = base + ((b * h_ + 2 * oy) * w_ + 2 * ox) * c_;
          f(std::array<T*, 4>{first, first + c_, first + w_ * c_, first + w_ * c_ + c_}, o);
        }
  }

  // The common case (2x2 windows, stride 2, even sizes: no padding either
  // way, no overlap): eight channels at a time, remembering which of the
  // four window positions held the maximum (4: none, a fused ReLU's zero).
  void forward_2x2(const tensor& x, tensor& y, int64_t batch) {
    window_max_.resize(y.size());
    for_each_window(x.data(), batch, [&](const std::array<const float*, 4>& at, size_t o) {
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
        put(y, window_max_, o, best, which, no_window);
      }
    });
  }

  // Every input value is written exactly once (dy at its window's maximum,
  // 0 elsewhere), so no zero-fill pass is needed first.
  void backward_2x2(const tensor& dy, tensor& dx) const {
    int64_t batch = static_cast<int64_t>(dy.size()) / (oh_ * ow_ * c_);
    for_each_window(dx.data(), batch, [&](const std::array<float*, 4>& at, size_t o) {
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
    });
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

} // namespace

std::unique_ptr<layer> make_max_pool(std::string name, int64_t size, int64_t stride, padding pad) {
  return std::make_unique<max_pool_layer>(std::move(name), size, stride, pad);
}

} // namespace troupe
