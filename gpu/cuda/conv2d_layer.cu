// 2-D convolution on a CUDA device (tensor/nn/conv2d_layer.cpp on the CPU).
#include "gpu/cuda/device_layer.cuh"

#include <algorithm>

namespace troupe::gpu::cuda {

namespace {

// im2col + one GEMM per chunk of examples, the chunk's unfolded rows capped
// at 1 GiB; with one chunk the forward's unfolding is reused by the backward.
// (At 256 MB the seeds' conv2 took three chunks at batch 1024, 642 MB, and
// unfolded all of them again in the backward.)
class conv2d final : public device_layer {
public:
  conv2d(layer_desc d, device_pool& pool) : device_layer(std::move(d)), col_(pool) {}

  void forward(device_context& cx, int64_t batch, const float* x, float* y,
               const float* const* params, bool) override {
    auto g = geometry_of(d_, batch);
    for (int64_t first = 0; first < batch; first += chunk()) {
      auto count = std::min(chunk(), batch - first);
      auto rows = count * g.oh * g.ow;
      col_.resize(static_cast<size_t>(rows * k()));
      im2col(x, col_.data(), g, first, count, cx.compute);
      gemm(cx, false, false, rows, d_.filters, k(), col_.data(), params[0],
           y + first * g.oh * g.ow * d_.filters);
    }
    add_bias(y, params[1], batch * g.oh * g.ow, d_.filters, cx.compute);
    unfolded_batch_ = chunk() >= batch ? batch : 0;
  }

  void backward(device_context& cx, int64_t batch, const float* x, const float*, const float* dy,
                float* dx, const float* const* params, float* const* grads) override {
    auto g = geometry_of(d_, batch);
    column_sums(cx, dy, batch * g.oh * g.ow, d_.filters, grads[1]);
    for (int64_t first = 0; first < batch; first += chunk()) {
      auto count = std::min(chunk(), batch - first);
      auto rows = count * g.oh * g.ow;
      const float* dy_chunk = dy + first * g.oh * g.ow * d_.filters;
      col_.resize(static_cast<size_t>(rows * k()));
      if (unfolded_batch_ != batch)
        im2col(x, col_.data(), g, first, count, cx.compute);
      gemm(cx, true, false, k(), d_.filters, rows, col_.data(), dy_chunk, grads[0],
           first == 0 ? 0.0f : 1.0f);
      if (dx) {
        gemm(cx, false, true, rows, k(), d_.filters, dy_chunk, params[0], col_.data());
        col2im(col_.data(), dx, g, first, count, cx.compute);
      }
    }
    unfolded_batch_ = 0; // col_ now holds gradients
  }

private:
  int64_t k() const { return d_.kernel_h * d_.kernel_w * d_.input[2]; }
  int64_t chunk() const {
    auto per_example = d_.output[0] * d_.output[1] * k() * static_cast<int64_t>(sizeof(float));
    return std::max<int64_t>(1, (int64_t{1} << 30) / std::max<int64_t>(1, per_example));
  }

  device_array<float> col_;
  int64_t unfolded_batch_ = 0;
};

} // namespace

std::unique_ptr<device_layer> make_device_conv2d(const layer_desc& d, device_pool& pool) {
  return std::make_unique<conv2d>(d, pool);
}

} // namespace troupe::gpu::cuda
