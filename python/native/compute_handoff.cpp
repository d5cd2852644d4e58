#include "python/native/compute_handoff.hpp"

#include <stdexcept>

namespace troupe::python {

batch_stats compute_handoff::compute(const std::vector<tensor>& params, const batch& b,
                                     std::vector<tensor>& grads) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_)
    throw std::runtime_error(why_);
  step_ = {&params, &b, &grads};
  phase_ = phase::posted;
  changed_.notify_all();
  changed_.wait(
    lock, [this] { return closed_ || phase_ == phase::answered || phase_ == phase::refused; });
  auto ended = phase_;
  phase_ = phase::idle;
  step_ = {};
  if (ended == phase::answered)
    return stats_;
  throw std::runtime_error(ended == phase::refused ? why_ : "the Python side stopped: " + why_);
}

std::optional<posted_step> compute_handoff::take(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, wait, [this] { return closed_ || phase_ == phase::posted; }))
    return std::nullopt;
  if (closed_)
    return std::nullopt;
  phase_ = phase::taken;
  return step_;
}

void compute_handoff::answer(const batch_stats& stats) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::taken)
    throw std::logic_error("no step was taken to answer");
  stats_ = stats;
  phase_ = phase::answered;
  changed_.notify_all();
}

void compute_handoff::refuse(std::string why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::taken)
    throw std::logic_error("no step was taken to refuse");
  why_ = std::move(why);
  phase_ = phase::refused;
  changed_.notify_all();
}

void compute_handoff::close(std::string why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_)
    return;
  closed_ = true;
  if (phase_ != phase::refused)
    why_ = std::move(why);
  changed_.notify_all();
}

bool compute_handoff::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

handed_off_model::handed_off_model(std::shared_ptr<model> inner,
                                   std::shared_ptr<compute_handoff> handoff)
  : inner_(std::move(inner)), handoff_(std::move(handoff)) {
  if (!inner_->tables().empty())
    throw std::invalid_argument("model " + inner_->name()
                                + " looks up embedding tables: a Python worker computes dense "
                                  "models only so far");
}

batch_stats handed_off_model::train_step(const std::vector<tensor>& params, const batch& b,
                                         std::vector<tensor>& grads) {
  auto& specs = inner_->variables();
  grads.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (grads[i].shape() != specs[i].shape)
      grads[i] = tensor(specs[i].shape);
  return handoff_->compute(params, b, grads);
}

} // namespace troupe::python
