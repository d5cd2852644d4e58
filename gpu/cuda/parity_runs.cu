// One layer, or the loss, alone on the device with host tensors in and out:
// what the parity tests compare with the CPU (gpu/parity.cpp).
#include "gpu/cuda_backend.hpp"

#include "gpu/cuda/device_layer.cuh"

namespace troupe::gpu::cuda {

layer_run run_layer(const layer_desc& desc, const tensor& x, const std::vector<tensor>& params,
                    const tensor& dy, bool training, int device) {
  device_context cx(device, device_limit(device, 0.5));
  auto batch = static_cast<int64_t>(x.size()) / num_elements(desc.input);
  auto layer = make_device_layer(desc, cx.pool);
  // Copies go on the compute stream: the kernels after them see their data
  // (a plain cudaMemcpy from pageable memory may return before its DMA ends).
  auto up = [&](const tensor& t) {
    device_array<float> d(cx.pool);
    d.resize(t.size());
    TROUPE_CUDA_CHECK(
      cudaMemcpyAsync(d.data(), t.data(), t.bytes(), cudaMemcpyHostToDevice, cx.compute));
    return d;
  };
  auto down = [&](const device_array<float>& d, shape_t shape) {
    tensor t(std::move(shape));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx.compute));
    TROUPE_CUDA_CHECK(cudaMemcpy(t.data(), d.data(), t.bytes(), cudaMemcpyDeviceToHost));
    return t;
  };
  auto dx_dev = up(x), dy_dev = up(dy);
  std::vector<device_array<float>> p, g;
  std::vector<const float*> pp;
  std::vector<float*> gp;
  for (auto& t : params) {
    p.push_back(up(t));
    g.emplace_back(cx.pool);
    g.back().resize(t.size());
  }
  for (auto& d : p)
    pp.push_back(d.data());
  for (auto& d : g)
    gp.push_back(d.data());
  device_array<float> y(cx.pool), dx(cx.pool);
  y.resize(static_cast<size_t>(batch * num_elements(desc.output)));
  dx.resize(x.size());
  layer->forward(cx, batch, dx_dev.data(), y.data(), pp.data(), training);
  layer->backward(cx, batch, dx_dev.data(), y.data(), dy_dev.data(), dx.data(), pp.data(),
                  gp.data());
  shape_t out_shape{batch};
  out_shape.insert(out_shape.end(), desc.output.begin(), desc.output.end());
  layer_run run;
  run.y = down(y, out_shape);
  run.dx = down(dx, x.shape());
  for (size_t i = 0; i < params.size(); ++i)
    run.grads.push_back(down(g[i], params[i].shape()));
  return run;
}

double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels, tensor& grad,
                             size_t& correct, int device) {
  auto rows = static_cast<int64_t>(labels.size());
  if (logits.shape().size() != 2 || logits.shape()[0] != rows)
    throw shape_error("softmax_cross_entropy: logits " + to_string(logits.shape()) + " for "
                      + std::to_string(rows) + " labels");
  auto classes = logits.shape()[1];
  for (auto label : labels)
    if (label < 0 || label >= classes)
      throw shape_error("softmax_cross_entropy: label " + std::to_string(label) + " outside 0.."
                        + std::to_string(classes - 1));
  device_context cx(device, device_limit(device, 0.5));
  device_array<float> z(cx.pool), loss(cx.pool), g(cx.pool);
  device_array<int32_t> l(cx.pool), c(cx.pool);
  z.resize(logits.size());
  g.resize(logits.size());
  loss.resize(labels.size());
  l.resize(labels.size());
  c.resize(labels.size());
  TROUPE_CUDA_CHECK(
    cudaMemcpyAsync(z.data(), logits.data(), logits.bytes(), cudaMemcpyHostToDevice, cx.compute));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(l.data(), labels.data(), labels.size() * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, cx.compute));
  softmax_cross_entropy(z.data(), l.data(), loss.data(), c.data(), g.data(), rows, classes,
                        cx.compute);
  auto need = sum_scratch_bytes(labels.size());
  device_array<char> scratch(cx.pool);
  scratch.resize(need);
  device_array<double> sum(cx.pool);
  device_array<int64_t> count(cx.pool);
  sum.resize(1);
  count.resize(1);
  sum_floats(loss.data(), sum.data(), labels.size(), scratch.data(), need, cx.compute);
  sum_ints(c.data(), count.data(), labels.size(), scratch.data(), need, cx.compute);
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx.compute));
  double total = 0;
  int64_t hits = 0;
  TROUPE_CUDA_CHECK(cudaMemcpy(&total, sum.data(), sizeof total, cudaMemcpyDeviceToHost));
  TROUPE_CUDA_CHECK(cudaMemcpy(&hits, count.data(), sizeof hits, cudaMemcpyDeviceToHost));
  grad = tensor(logits.shape());
  TROUPE_CUDA_CHECK(cudaMemcpy(grad.data(), g.data(), grad.bytes(), cudaMemcpyDeviceToHost));
  correct = static_cast<size_t>(hits);
  return rows > 0 ? total / static_cast<double>(rows) : 0.0;
}

} // namespace troupe::gpu::cuda
