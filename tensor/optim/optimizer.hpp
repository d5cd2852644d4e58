#pragma once
// Update rules applied on the PS shards, with TF 1.x's formulas, and
// learning-rate schedules. An optimizer keeps its slot variables (momentum,
// accumulators, Adam's moments) beside the variables of the shard it serves,
// so slots always live where their variable lives.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// The learning rate as a function of the global step (TF's names).
struct lr_schedule {
  enum class kind { constant, exponential_decay, piecewise_constant };
  kind type = kind::constant;
  double base = 0.01;
  /// exponential_decay: base * rate ^ (step / decay_steps), the exponent
  /// floored when staircase (seed 001: 0.001, 1000 steps, rate 0.5).
  int64_t decay_steps = 1000;
  double decay_rate = 0.5;
  bool staircase = false;
  /// piecewise_constant: values[i] while step <= boundaries[i] (TF's rule),
  /// values.back() after the last boundary; values has one more entry.
  std::vector<int64_t> boundaries;
  std::vector<double> values;

  double at(int64_t step) const;
  /// What is wrong with the schedule, if anything.
  maybe_failure check() const;
};

TROUPE_ENUM_NAMES(lr_schedule::kind, {lr_schedule::kind::constant, "constant"},
                  {lr_schedule::kind::exponential_decay, "exponential"},
                  {lr_schedule::kind::piecewise_constant, "piecewise"});

/// The update rules (TF 1.x's formulas).
enum class optimizer_kind { sgd, momentum, adagrad, rmsprop, adam };

TROUPE_ENUM_NAMES(optimizer_kind, {optimizer_kind::sgd, "sgd"},
                  {optimizer_kind::momentum, "momentum"}, {optimizer_kind::adagrad, "adagrad"},
                  {optimizer_kind::rmsprop, "rmsprop"}, {optimizer_kind::adam, "adam"});

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::sgd;
  lr_schedule learning_rate;
  double momentum = 0.9;            ///< momentum; rmsprop's momentum is rms_momentum
  bool nesterov = false;            ///< momentum only
  double initial_accumulator = 0.1; ///< adagrad
  double rms_decay = 0.9;           ///< rmsprop
  double rms_momentum = 0.0;        ///< rmsprop
  double beta1 = 0.9;               ///< adam
  double beta2 = 0.999;             ///< adam
  double epsilon = 0;               ///< 0: the optimizer's TF default (rmsprop 1e-10, adam 1e-8)

  /// What is wrong with the configuration, if anything (errc::invalid_setting).
  maybe_failure check() const;
};

/// Plain SGD at a constant rate.
inline optimizer_config plain_sgd(double learning_rate) {
  optimizer_config c;
  c.learning_rate.base = learning_rate;
  return c;
}

class optimizer {
public:
  virtual ~optimizer() = default;

  /// One update of `var` with `grad` at global step `step` (the number of
  /// updates applied before this one). Shapes must match.
  void apply(const std::string& name, tensor& var, const tensor& grad, int64_t step);

  /// The slot variables, as "<variable>/<slot>" -> value.
  std::map<std::string, const tensor*> slots() const;

  /// Sets a slot restored from a checkpoint ("<variable>/<slot>"); the
  /// caller checks the name and shape (variable_store::restore_slot).
  void restore_slot(const std::string& key, tensor value) { slots_[key] = std::move(value); }

  /// The learning rate at a global step.
  double learning_rate_at(int64_t step) const { return schedule_.at(step); }

protected:
  /// Slot `slot` of variable `name`, created with `init` on first use.
  tensor& slot(const std::string& name, const char* slot, const tensor& like, float init);
  virtual void update(const std::string& name, tensor& var, const tensor& grad, double lr,
                      int64_t step) = 0;

private:
  friend std::unique_ptr<optimizer> make_optimizer(const optimizer_config& config);
  lr_schedule schedule_;
  std::map<std::string, tensor> slots_;
};

/// Throws troupe_error when the configuration is invalid.
std::unique_ptr<optimizer> make_optimizer(const optimizer_config& config);

/// The slots an optimizer keeps per variable, under TF's names ("Adam",
/// "Adam_1", ...); what a checkpoint must hold beside each variable.
std::vector<std::string> slot_names(optimizer_kind kind);

/// sqrt(sum of squares) over all tensors (for clipping by global norm).
double global_norm(const std::vector<tensor>& tensors);

/// Scales every tensor by clip / global_norm when the norm exceeds clip (TF's
/// clip_by_global_norm); returns the norm before clipping. A known_norm >= 0
/// (computed where the gradients were) is used instead of a pass over them.
double clip_by_global_norm(std::vector<tensor>& tensors, double clip, double known_norm = -1);

/// The same over buffers of sizes[i] floats (a model's staging buffers).
double clip_by_global_norm(const std::vector<float*>& buffers, const std::vector<size_t>& sizes,
                           double clip, double known_norm = -1);

} // namespace troupe
