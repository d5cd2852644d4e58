#pragma once
// A worker's step as one plain object, without CAF, for dense values and
// embedding rows alike: the step's batch and keys (read from the worker's
// own share of the data, where it reads one), the pull of its values and
// of each table's rows (one request a shard), embedding.max-norm on the
// rows looked up, the checks and clipping of the gradients, the push of a
// step's gradients and rows together (one request a shard: each shard takes
// it whole, once), and each shard's answer settled into the step's report
// with the shards' receipts. Its caller computes between the pull and the
// push (a C++ model, or another framework's), and keeps what a step does
// not know: the leases, the sending of reports, recovery. The worker actor
// drives it; a caller outside CAF can too (its shard_exchange takes any
// message path, or bulk links alone).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/exchange/row_exchange.hpp"
#include "actors/exchange/shard_exchange.hpp"
#include "actors/worker/gradient_guard.hpp"
#include "actors/worker/param_buffers.hpp"
#include "actors/worker/step_pipeline.hpp"
#include "tensor/data/stream.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/sparse/table_setup.hpp"

namespace troupe {

/// How a worker's steps move and check their tensors (train.* keys).
struct step_settings {
  int32_t worker = 0;
  bool pull_ahead = false; ///< train.pull-ahead (dense models only)
  wire_precision precision = wire_precision::fp32;
  double push_topk = 0;
  double clip_norm = 0; ///< clip the gradients' global norm to it (0: off)
  double max_norm = 0;  ///< embedding.max-norm: looked-up rows clipped to it (0: off)
};

class worker_step {
public:
  /// `exchange` must outlive the step. hooks.compute runs once a step's
  /// values and rows are in: the caller computes and calls computed().
  worker_step(shard_exchange& exchange, std::string label, step_settings settings,
              step_hooks hooks);

  /// A new plan of run `run`: its slices (`router` must outlive its use),
  /// the model's variables and staging (null: host tensors), and each
  /// table as the plan holds it, over `shards` shards. Whatever was under
  /// way is void. Throws std::invalid_argument where the plan cannot go with
  /// the settings (pull-ahead and tables).
  void reset(run_id run, const slice_router& router, const std::vector<variable_spec>& variables,
             host_staging* staging, const std::vector<table_setup>& tables, int32_t shards);
  /// From now on each step reads its batch from `data` (the worker's own
  /// share) and a table model's keys as `net` says; with no data, a model
  /// that brings its batches gives each table's keys (next_batch_keys),
  /// else the caller sets them before begin. Both must outlive their use.
  void read_from(example_stream* data, model* net);

  /// A granted step begins: its batch read and its keys taken (where it
  /// reads its data), its values and rows pulled (unless pulled ahead),
  /// then hooks.compute.
  void begin(const step_grant& grant);
  /// The step is computed, its loss and counts in `stats`: its gradients
  /// checked (one not finite: nothing pushed, hooks.nonfinite) and clipped,
  /// then pushed with its rows, answered, and reported (hooks.report).
  void computed(const batch_stats& stats);

  /// What the caller computes on: the parameters (or the staging buffers),
  /// where the gradients go, the batch read, and each table's rows (keys,
  /// pulled values, and the rows' gradients the caller writes).
  std::vector<tensor>& params() noexcept { return buffers_.params(); }
  std::vector<tensor>& grads() noexcept { return buffers_.grads(); }
  host_staging* staging() const noexcept { return buffers_.staging(); }
  const batch& current() const noexcept { return batch_; }
  size_t tables() const noexcept { return rows_.size(); }
  batch_rows& rows(size_t table) { return rows_.at(table).batch; }
  /// Every table's rows, in the plan's order.
  const std::vector<batch_rows*>& all_rows() const noexcept { return row_pointers_; }
  /// The report of the step under way (run, worker, step, data position).
  const step_report& report() const noexcept { return report_; }
  /// A report that asks for a step (a worker's first, after a new plan).
  step_report ask() const;

  /// How long the step under way took, until `end` (its answers): in all,
  /// waiting for its pull, and from its push to the end.
  struct durations {
    double step_seconds = 0, pull_seconds = 0, push_seconds = 0;
  };
  durations took(std::chrono::steady_clock::time_point end) const;

  /// A pull-ahead job is under way (or done and not yet collected).
  bool flushable() const noexcept { return pipeline_.flushable(); }
  /// No step is granted: the pull-ahead job is collected, then over.
  void flush() { pipeline_.flush(); }
  /// What is under way is void (a lost peer, a new plan).
  void drop();

private:
  struct table_rows {
    std::unique_ptr<row_exchange> exchange;
    batch_rows batch;
    uint32_t dim = 0;
    std::vector<int64_t> ids;       // a batch's keys, occurrence by occurrence
    std::vector<float> clip_scales; // embedding.max-norm's, for the backward pass
  };
  /// The step's values and rows are in: rows clipped, a dense model's batch
  /// read, then the caller's compute.
  void pulled();
  /// The next batch into batch_, its position into the report; false (the
  /// worker fails) where the data cannot be read.
  bool read_batch();
  /// The program's keys for each table (a model that brings its batches);
  /// false (the worker fails) where it gives none.
  bool take_program_keys();

  shard_exchange& exchange_;
  std::string label_;
  step_settings settings_;
  step_hooks hooks_;
  param_buffers buffers_;
  gradient_guard guard_;
  step_pipeline pipeline_;
  std::vector<table_rows> rows_;
  std::vector<std::string> names_; // the variables', for messages
  example_stream* data_ = nullptr;
  model* net_ = nullptr;
  std::vector<batch_rows*> row_pointers_; // into rows_, set with the plan
  batch batch_;
  step_report report_;
  uint64_t proof_ = 0; // the grant's, shown with the step's pushes
  std::chrono::steady_clock::time_point began_, pulled_, computed_;
};

} // namespace troupe
