#include "python/native/compute_handoff.hpp"

#include <stdexcept>

namespace troupe::python {

batch_stats compute_handoff::compute(const std::vector<tensor>& params, const batch& b,
                                     std::vector<tensor>& grads,
                                     const std::vector<batch_rows*>* rows) {
  posted_step step;
  step.what = posted_step::kind::compute;
  step.params = &params;
  step.examples = &b;
  step.grads = &grads;
  step.rows = rows;
  return post(step);
}

void compute_handoff::ask_keys(const std::vector<batch_rows*>& rows) {
  posted_step step;
  step.what = posted_step::kind::keys;
  step.rows = &rows;
  post(step);
}

batch_stats compute_handoff::post(const posted_step& step) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_)
    throw std::runtime_error(why_);
  step_ = step;
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

void compute_handoff::report(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [known, last] : reported_)
    if (known == name) {
      last = value;
      return;
    }
  reported_.emplace_back(name, value);
}

bool compute_handoff::take_reported(std::vector<std::string>& names, std::vector<double>& values) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reported_.empty())
    return false;
  for (auto& [name, value] : reported_) {
    names.push_back(name);
    values.push_back(value);
  }
  reported_.clear();
  return true;
}

handed_off_model::handed_off_model(std::shared_ptr<model> inner,
                                   std::shared_ptr<compute_handoff> handoff)
  : inner_(std::move(inner)), handoff_(std::move(handoff)) {
}

batch_stats handed_off_model::train_step_rows(const std::vector<tensor>& params, const batch& b,
                                              batch_rows& rows, std::vector<tensor>& grads) {
  auto& specs = inner_->variables();
  grads.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (grads[i].shape() != specs[i].shape)
      grads[i] = tensor(specs[i].shape);
  rows.grads.assign(rows.keys.size() * tables().at(0).dim, 0.0f);
  std::vector<batch_rows*> all{&rows};
  return handoff_->compute(params, b, grads, &all);
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

program_model::program_model(model_declaration declaration,
                             std::shared_ptr<compute_handoff> handoff)
  : declared_model(std::move(declaration)), handoff_(std::move(handoff)) {
}

void program_model::next_batch_keys(const std::vector<batch_rows*>& rows) {
  if (rows.size() != tables().size())
    throw std::invalid_argument("the step carries " + std::to_string(rows.size())
                                + " tables' rows, the model declares "
                                + std::to_string(tables().size()));
  handoff_->ask_keys(rows);
}

namespace {

void size_gradients(const std::vector<variable_spec>& specs, std::vector<tensor>& grads) {
  grads.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    if (grads[i].shape() != specs[i].shape)
      grads[i] = tensor(specs[i].shape);
}

} // namespace

batch_stats program_model::train_step(const std::vector<tensor>& params, const batch& b,
                                      std::vector<tensor>& grads) {
  size_gradients(variables(), grads);
  return handoff_->compute(params, b, grads);
}

batch_stats program_model::train_step_tables(const std::vector<tensor>& params, const batch& b,
                                             const std::vector<batch_rows*>& rows,
                                             std::vector<tensor>& grads) {
  size_gradients(variables(), grads);
  if (rows.size() != tables().size())
    throw std::invalid_argument("the step carries " + std::to_string(rows.size())
                                + " tables' rows, the model declares "
                                + std::to_string(tables().size()));
  for (size_t t = 0; t < rows.size(); ++t)
    rows[t]->grads.assign(rows[t]->keys.size() * tables()[t].dim, 0.0f);
  return handoff_->compute(params, b, grads, &rows);
}

} // namespace troupe::python
