#include "gpu/cuda_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "gpu/cuda/device_layer.cuh"

namespace troupe::gpu::cuda {

namespace {

/// CUDA events, destroyed with their owner (also when a constructor throws).
struct event_list {
  std::vector<cudaEvent_t> events;
  event_list() = default;
  event_list(const event_list&) = delete;
  event_list& operator=(const event_list&) = delete;
  ~event_list() {
    for (auto e : events)
      cudaEventDestroy(e);
  }
  void add() {
    cudaEvent_t e = nullptr;
    TROUPE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events.push_back(e);
  }
  cudaEvent_t operator[](size_t i) const { return events[i]; }
};

// Host copies into and out of pinned memory go in pieces of this many floats
// (1 MiB), so that the DMA of one piece overlaps the host copy of the next:
// fc1's 12.8 MB would otherwise be copied whole and only then sent.
constexpr size_t staging_chunk = size_t{1} << 18;

size_t chunks_of(size_t floats) {
  return (floats + staging_chunk - 1) / staging_chunk;
}

class cuda_model final : public model {
public:
  cuda_model(std::unique_ptr<model> reference, int device, double memory_fraction)
    : reference_(std::move(reference)), cx_(device, device_limit(device, memory_fraction)),
      images_(cx_.pool), labels_(cx_.pool), loss_rows_(cx_.pool), correct_rows_(cx_.pool),
      scratch_(cx_.pool), sums_(cx_.pool), squares_(cx_.pool), counts_(cx_.pool),
      grad_logits_(cx_.pool) {
    descs_ = reference_->layers();
    auto& vars = reference_->variables();
    for (auto& d : descs_) {
      layers_.push_back(d.skipped ? nullptr : make_device_layer(d, cx_.pool));
      outputs_.emplace_back(cx_.pool);
      input_grads_.emplace_back(cx_.pool);
    }
    size_t offset = 0;
    for (auto& v : vars) {
      params_.emplace_back(cx_.pool);
      grads_.emplace_back(cx_.pool);
      auto n = static_cast<size_t>(num_elements(v.shape));
      params_.back().resize(n);
      grads_.back().resize(n);
      offsets_.push_back(offset);
      offset += n;
      first_chunk_.push_back(chunk_events_);
      chunk_events_ += chunks_of(n);
      param_ready_.add();
      grad_ready_.add();
    }
    for (size_t c = 0; c < chunk_events_; ++c)
      grad_copied_.add();
    total_floats_ = offset;
    float* params_host = param_host_.reserve(total_floats_);
    float* grads_host = grad_host_.reserve(total_floats_);
    for (size_t v = 0; v < vars.size(); ++v) {
      staging_.params.push_back(params_host + offsets_[v]);
      staging_.grads.push_back(grads_host + offsets_[v]);
      staging_.sizes.push_back(params_[v].size());
    }
  }

  ~cuda_model() override {
    cudaSetDevice(cx_.device);
    cudaStreamSynchronize(cx_.compute);
    cudaStreamSynchronize(cx_.copies);
  }

  const std::string& name() const override { return reference_->name(); }
  const std::vector<variable_spec>& variables() const override { return reference_->variables(); }
  std::string describe() const override { return reference_->describe(); }
  std::vector<layer_desc> layers() const override { return descs_; }
  shape_t input_shape() const override { return reference_->input_shape(); }

  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override {
    check_params(params);
    return step(&params, b, &grads);
  }

  host_staging* staging() noexcept override { return &staging_; }

  batch_stats train_step_staged(const batch& b) override { return step(nullptr, b, nullptr); }
  void skip_training_steps(uint64_t steps, int64_t batch) override {
    for (auto& l : layers_)
      if (l)
        l->skip_training_steps(steps, batch);
  }

  batch_stats evaluate(const std::vector<tensor>& params, const batch& b) override {
    check_params(params);
    check_batch(b);
    TROUPE_CUDA_CHECK(cudaSetDevice(cx_.device));
    try {
      upload(&params, b);
      forward(b.size(), false);
      loss_and_correct(static_cast<int64_t>(b.size()), nullptr);
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx_.copies));
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx_.compute));
    } catch (...) {
      quiesce();
      throw;
    }
    return stats(b.size());
  }

private:
  int64_t classes() const { return num_elements(descs_.back().output); }

  // Parameters from `params`, or from staging_ when null; gradients into
  // `grads`, or left in staging_ when null.
  batch_stats step(const std::vector<tensor>* params, const batch& b, std::vector<tensor>* grads) {
    check_batch(b);
    TROUPE_CUDA_CHECK(cudaSetDevice(cx_.device));
    try {
      upload(params, b);
      forward(b.size(), true);
      auto rows = static_cast<int64_t>(b.size());
      grad_logits_.resize(static_cast<size_t>(rows * classes()));
      loss_and_correct(rows, grad_logits_.data());
      backward(rows);
      gradient_norm();
      if (grads)
        copy_out(*grads);
      else
        TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx_.copies)); // every gradient landed
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(cx_.compute));  // loss, accuracy, norm
    } catch (...) {
      quiesce();
      throw;
    }
    auto out = stats(b.size());
    double squares = 0;
    for (size_t v = 0; v < reference_->variables().size(); ++v)
      squares += norm_host_[v];
    out.gradient_norm = std::sqrt(squares);
    return out;
  }

  // After a failure: when a step returns or throws, no copy or kernel may
  // still read or write the staging buffers the caller owns between steps.
  void quiesce() noexcept {
    cudaStreamSynchronize(cx_.copies);
    cudaStreamSynchronize(cx_.compute);
  }

  // Each piece of a gradient is copied out of the pinned buffer as soon as it
  // has landed there, in the order the backward pass produced them, while the
  // rest are still computed or copied.
  void copy_out(std::vector<tensor>& grads) {
    auto& vars = reference_->variables();
    grads.resize(vars.size());
    for (auto v : download_order_) {
      grads[v].resize(vars[v].shape);
      size_t n = grads[v].size();
      for (size_t c = 0, done = 0; done < n; ++c, done += staging_chunk) {
        TROUPE_CUDA_CHECK(cudaEventSynchronize(grad_copied_[first_chunk_[v] + c]));
        std::memcpy(grads[v].data() + done, staging_.grads[v] + done,
                    std::min(staging_chunk, n - done) * sizeof(float));
      }
    }
  }

  void check_params(const std::vector<tensor>& params) const {
    auto& vars = reference_->variables();
    if (params.size() != vars.size())
      throw shape_error(name() + ": expected " + std::to_string(vars.size()) + " parameters, got "
                        + std::to_string(params.size()));
    for (size_t v = 0; v < vars.size(); ++v)
      if (params[v].shape() != vars[v].shape)
        throw shape_error(name() + ": " + vars[v].name + " has shape "
                          + to_string(params[v].shape()) + ", expected "
                          + to_string(vars[v].shape));
  }

  void check_batch(const batch& b) const {
    auto per_example = static_cast<size_t>(num_elements(reference_->input_shape()));
    if (b.images.size() != b.size() * per_example)
      throw shape_error(name() + ": a batch of " + std::to_string(b.size()) + " labels has "
                        + std::to_string(b.images.size()) + " image values, expected "
                        + std::to_string(b.size() * per_example));
    // The loss kernel indexes logits by label: refuse what would read outside.
    for (auto label : b.labels)
      if (label < 0 || label >= classes())
        throw shape_error(name() + ": label " + std::to_string(label) + " outside 0.."
                          + std::to_string(classes() - 1));
  }

  // Parameters up on the copy stream, each with an event the layer using it
  // waits for: from the caller's tensors through the pinned buffer in pieces
  // (the DMA of one overlapping the host copy of the next), or straight from
  // the pinned buffer the caller filled. Images and labels go on the compute
  // stream, which needs them first.
  void upload(const std::vector<tensor>* params, const batch& b) {
    auto& vars = reference_->variables();
    for (size_t v = 0; v < vars.size(); ++v) {
      size_t n = params_[v].size();
      float* staged = staging_.params[v];
      if (!params) {
        TROUPE_CUDA_CHECK(cudaMemcpyAsync(params_[v].data(), staged, n * sizeof(float),
                                          cudaMemcpyHostToDevice, cx_.copies));
      } else {
        for (size_t done = 0; done < n; done += staging_chunk) {
          size_t count = std::min(staging_chunk, n - done);
          std::memcpy(staged + done, (*params)[v].data() + done, count * sizeof(float));
          TROUPE_CUDA_CHECK(cudaMemcpyAsync(params_[v].data() + done, staged + done,
                                            count * sizeof(float), cudaMemcpyHostToDevice,
                                            cx_.copies));
        }
      }
      TROUPE_CUDA_CHECK(cudaEventRecord(param_ready_[v], cx_.copies));
    }
    auto n = b.images.size();
    float* input = input_host_.reserve(n + b.size());
    std::memcpy(input, b.images.data(), n * sizeof(float));
    auto* labels = reinterpret_cast<int32_t*>(input + n);
    std::copy(b.labels.begin(), b.labels.end(), labels);
    images_.resize(n);
    labels_.resize(b.size());
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(images_.data(), input, n * sizeof(float),
                                      cudaMemcpyHostToDevice, cx_.compute));
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(labels_.data(), labels, b.size() * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, cx_.compute));
  }

  const float* const* layer_params(const layer_desc& d) {
    param_ptrs_.clear();
    for (size_t v = d.first_variable; v < d.first_variable + d.num_variables; ++v)
      param_ptrs_.push_back(params_[v].data());
    return param_ptrs_.data();
  }

  void forward(size_t batch_size, bool training) {
    auto batch = static_cast<int64_t>(batch_size);
    const float* current = images_.data();
    inputs_.assign(descs_.size(), nullptr);
    for (size_t i = 0; i < descs_.size(); ++i) {
      inputs_[i] = current;
      if (!layers_[i])
        continue; // a view, or a ReLU the next layer applies
      auto& d = descs_[i];
      for (size_t v = d.first_variable; v < d.first_variable + d.num_variables; ++v)
        TROUPE_CUDA_CHECK(cudaStreamWaitEvent(cx_.compute, param_ready_[v], 0));
      outputs_[i].resize(static_cast<size_t>(batch * num_elements(d.output)));
      layers_[i]->forward(cx_, batch, current, outputs_[i].data(), layer_params(d), training);
      current = outputs_[i].data();
    }
    logits_ = current;
  }

  void loss_and_correct(int64_t rows, float* grad) {
    loss_rows_.resize(static_cast<size_t>(rows));
    correct_rows_.resize(static_cast<size_t>(rows));
    softmax_cross_entropy(logits_, labels_.data(), loss_rows_.data(), correct_rows_.data(), grad,
                          rows, classes(), cx_.compute);
    auto need = reduction_scratch(static_cast<size_t>(rows));
    sums_.resize(1);
    counts_.resize(1);
    sum_floats(loss_rows_.data(), sums_.data(), static_cast<size_t>(rows), scratch_.data(), need,
               cx_.compute);
    sum_ints(correct_rows_.data(), counts_.data(), static_cast<size_t>(rows), scratch_.data(), need,
             cx_.compute);
    auto* host = reinterpret_cast<double*>(scalar_host_.reserve(4));
    TROUPE_CUDA_CHECK(
      cudaMemcpyAsync(host, sums_.data(), sizeof(double), cudaMemcpyDeviceToHost, cx_.compute));
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(host + 1, counts_.data(), sizeof(int64_t),
                                      cudaMemcpyDeviceToHost, cx_.compute));
  }

  batch_stats stats(size_t examples) {
    auto* host = reinterpret_cast<double*>(scalar_host_.data());
    int64_t correct = 0;
    std::memcpy(&correct, host + 1, sizeof correct);
    return {examples > 0 ? host[0] / static_cast<double>(examples) : 0.0,
            static_cast<size_t>(correct), examples};
  }

  // Each variable's sum of squares (CUB), for the global norm the worker
  // clips by and checks finiteness with, without another pass on the host.
  void gradient_norm() {
    auto& vars = reference_->variables();
    size_t largest = 1;
    for (auto& g : grads_)
      largest = std::max(largest, g.size());
    auto need = reduction_scratch(largest);
    squares_.resize(vars.size());
    for (size_t v = 0; v < vars.size(); ++v)
      sum_squares(grads_[v].data(), squares_.data() + v, grads_[v].size(), scratch_.data(), need,
                  cx_.compute);
    norm_host_ = reinterpret_cast<double*>(norm_pinned_.reserve(2 * vars.size()));
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(norm_host_, squares_.data(), vars.size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, cx_.compute));
  }

  // CUB's scratch bytes for reductions of up to n items, asked of CUB only
  // when n passes the largest seen, so a step queries nothing.
  size_t reduction_scratch(size_t n) {
    if (n > scratch_items_) {
      scratch_.resize(std::max(scratch_.size(), sum_scratch_bytes(n)));
      scratch_items_ = n;
    }
    return scratch_.size();
  }

  // Layers from the last to the first; each layer's gradients go down on the
  // copy stream as soon as they are computed.
  void backward(int64_t batch) {
    float* host = grad_host_.data();
    download_order_.clear();
    const float* upstream = grad_logits_.data();
    size_t first_compute = 0;
    while (first_compute < layers_.size() && !layers_[first_compute])
      ++first_compute;
    for (size_t i = descs_.size(); i-- > 0;) {
      if (!layers_[i])
        continue;
      auto& d = descs_[i];
      float* dx = nullptr;
      if (i != first_compute) {
        input_grads_[i].resize(static_cast<size_t>(batch * num_elements(d.input)));
        dx = input_grads_[i].data();
      }
      grad_ptrs_.clear();
      for (size_t v = d.first_variable; v < d.first_variable + d.num_variables; ++v)
        grad_ptrs_.push_back(grads_[v].data());
      layers_[i]->backward(cx_, batch, inputs_[i], outputs_[i].data(), upstream, dx,
                           layer_params(d), grad_ptrs_.data());
      for (size_t v = d.first_variable; v < d.first_variable + d.num_variables; ++v) {
        TROUPE_CUDA_CHECK(cudaEventRecord(grad_ready_[v], cx_.compute));
        TROUPE_CUDA_CHECK(cudaStreamWaitEvent(cx_.copies, grad_ready_[v], 0));
        size_t n = grads_[v].size();
        for (size_t c = 0, done = 0; done < n; ++c, done += staging_chunk) {
          TROUPE_CUDA_CHECK(cudaMemcpyAsync(host + offsets_[v] + done, grads_[v].data() + done,
                                            std::min(staging_chunk, n - done) * sizeof(float),
                                            cudaMemcpyDeviceToHost, cx_.copies));
          TROUPE_CUDA_CHECK(cudaEventRecord(grad_copied_[first_chunk_[v] + c], cx_.copies));
        }
        download_order_.push_back(v);
      }
      if (dx)
        upstream = dx;
    }
  }

  std::unique_ptr<model> reference_; // the CPU model: names, shapes, descriptions
  device_context cx_;
  std::vector<layer_desc> descs_;
  std::vector<std::unique_ptr<device_layer>> layers_; // null where skipped
  std::vector<device_array<float>> outputs_, input_grads_, params_, grads_;
  std::vector<const float*> inputs_;
  std::vector<size_t> offsets_; // of each variable in the pinned buffers
  size_t total_floats_ = 0;
  std::vector<size_t> first_chunk_; // each variable's first event in grad_copied_
  size_t chunk_events_ = 0;
  event_list param_ready_, grad_ready_, grad_copied_; // grad_copied_: one per staging chunk
  std::vector<size_t> download_order_; // variables in the order their gradients went down
  device_array<float> images_;
  device_array<int32_t> labels_;
  device_array<float> loss_rows_;
  device_array<int32_t> correct_rows_;
  device_array<char> scratch_;
  size_t scratch_items_ = 0; // the most items scratch_ has been sized for
  device_array<double> sums_, squares_;
  device_array<int64_t> counts_;
  device_array<float> grad_logits_;
  const float* logits_ = nullptr;
  pinned_buffer param_host_, grad_host_, input_host_, scalar_host_, norm_pinned_;
  host_staging staging_;        // per variable, into param_host_ and grad_host_
  double* norm_host_ = nullptr; // per-variable sums of squares, in norm_pinned_
  std::vector<const float*> param_ptrs_;
  std::vector<float*> grad_ptrs_;
};

} // namespace

void check_memory_share(int index, double memory_fraction) {
  TROUPE_CUDA_CHECK(cudaSetDevice(index));
  size_t free = 0, total = 0;
  TROUPE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  auto wanted = static_cast<size_t>(memory_fraction * static_cast<double>(total));
  if (wanted > free) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", memory_fraction);
    throw troupe_error(std::string("train.gpu-memory-fraction = ") + fraction + " asks for "
                       + megabytes(wanted) + " of cuda:" + std::to_string(index) + ", but only "
                       + megabytes(free) + " of " + megabytes(total)
                       + " are free; lower it or free the device");
  }
}

std::unique_ptr<model> make_cuda_model(std::unique_ptr<model> reference, int device,
                                       double memory_fraction) {
  return std::make_unique<cuda_model>(std::move(reference), device, memory_fraction);
}

} // namespace troupe::gpu::cuda
