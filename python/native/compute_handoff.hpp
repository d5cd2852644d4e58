#pragma once
// A worker's compute handed to another thread: the worker actor's thread
// posts a step (the pulled values, the batch, the gradient buffers) and
// waits; the Python thread takes it, computes (in PyTorch), writes the
// gradients and answers. Closing wakes both sides: the run is over, or the
// Python side gave up. Without CAF or Python: a plain monitor.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensor/nn/declared_model.hpp"
#include "tensor/nn/model.hpp"

namespace troupe::python {

/// A step as the computing side sees it, valid until it answers: the keys
/// of the program's next batch to give (a declared model with tables,
/// before the step's pull), or a step to compute.
struct posted_step {
  enum class kind { keys, compute };
  kind what = kind::compute;
  const std::vector<tensor>* params = nullptr;
  const batch* examples = nullptr;
  std::vector<tensor>* grads = nullptr;
  /// compute: each table's keys and pulled values; the program writes
  /// their gradients (sized keys × dim). keys: the program sets each
  /// table's keys. Null: a dense model.
  const std::vector<batch_rows*>* rows = nullptr;
  // keys: `rows` too, whose keys the program sets (their distinct set).
};

class compute_handoff {
public:
  /// The worker's side: posts a step and waits for its answer. Throws
  /// std::runtime_error when closed first, or when the computing side
  /// failed (the worker then fails the run with that message).
  batch_stats compute(const std::vector<tensor>& params, const batch& b, std::vector<tensor>& grads,
                      const std::vector<batch_rows*>* rows = nullptr);
  /// The worker's side: the keys of the program's next batch, each
  /// table's into rows[t]->keys; throws as compute does.
  void ask_keys(const std::vector<batch_rows*>& rows);

  /// The computing side: the posted step, waiting at most `wait`; nullopt
  /// on timeout or once closed (closed() tells which).
  std::optional<posted_step> take(std::chrono::milliseconds wait);
  /// The step taken is computed (its gradients written).
  void answer(const batch_stats& stats);
  /// The step taken could not be computed: `why` fails the worker.
  void refuse(std::string why);

  /// No more steps: both sides wake; `why` is what a waiting worker reads.
  void close(std::string why);
  bool closed() const;

  /// The program's metrics (w.report), kept until the worker takes them
  /// for the chief; a name reported again keeps its last value.
  void report(const std::string& name, double value);
  bool take_reported(std::vector<std::string>& names, std::vector<double>& values);

private:
  /// Posts `step` and waits for its answer (compute and ask_keys).
  batch_stats post(const posted_step& step);

  enum class phase { idle, posted, taken, answered, refused };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  phase phase_ = phase::idle;
  posted_step step_;
  batch_stats stats_;
  std::string why_;
  bool closed_ = false;
  std::vector<std::pair<std::string, double>> reported_;
};

/// The settings' model with its train_step handed off: variables, tables,
/// keys, layers, evaluation and prediction stay the inner model's, so that
/// the plan, the checks and the export are the same as for a C++ worker.
class handed_off_model : public model {
public:
  handed_off_model(std::shared_ptr<model> inner, std::shared_ptr<compute_handoff> handoff);

  const std::string& name() const override { return inner_->name(); }
  const std::vector<variable_spec>& variables() const override { return inner_->variables(); }
  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override;
  batch_stats evaluate(const std::vector<tensor>& params, const batch& b) override {
    return inner_->evaluate(params, b);
  }
  void skip_training_steps(uint64_t steps, int64_t batch_size) override {
    inner_->skip_training_steps(steps, batch_size);
  }
  std::string describe() const override { return inner_->describe(); }
  std::vector<layer_desc> layers() const override { return inner_->layers(); }
  shape_t input_shape() const override { return inner_->input_shape(); }
  // A table model's keys are the inner model's; its step hands the rows over too.
  const std::vector<table_spec>& tables() const override { return inner_->tables(); }
  void batch_keys(const batch& b, std::vector<int64_t>& ids) const override {
    inner_->batch_keys(b, ids);
  }
  batch_stats train_step_rows(const std::vector<tensor>& params, const batch& b, batch_rows& rows,
                              std::vector<tensor>& grads) override;

private:
  std::shared_ptr<model> inner_;
  std::shared_ptr<compute_handoff> handoff_;
};

/// A model declared by the Python program (train.model = declared): its
/// variables and tables are the module's, it brings each step's batch (the
/// keys of its tables asked before the pull) and computes each step in
/// PyTorch through the handoff.
class program_model : public declared_model {
public:
  program_model(model_declaration declaration, std::shared_ptr<compute_handoff> handoff);

  bool brings_batches() const override { return true; }
  void next_batch_keys(const std::vector<batch_rows*>& rows) override;
  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override;
  batch_stats train_step_tables(const std::vector<tensor>& params, const batch& b,
                                const std::vector<batch_rows*>& rows,
                                std::vector<tensor>& grads) override;
  bool take_reported(std::vector<std::string>& names, std::vector<double>& values) override {
    return handoff_->take_reported(names, values);
  }

private:
  std::shared_ptr<compute_handoff> handoff_;
};

} // namespace troupe::python
