#include "actors/worker/worker_step.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "tensor/sparse/lookup_batch.hpp"

namespace troupe {

worker_step::worker_step(shard_exchange& exchange, std::string label, step_settings settings,
                         step_hooks hooks)
  : exchange_(exchange), label_(std::move(label)), settings_(settings), hooks_(std::move(hooks)),
    guard_(settings.clip_norm), pipeline_(exchange, buffers_, label_, settings.pull_ahead, [this] {
      auto h = hooks_;
      h.compute = [this] { pulled(); };
      return h;
    }()) {
  report_.worker = settings.worker;
}

void worker_step::reset(run_id run, const slice_router& router,
                        const std::vector<variable_spec>& variables, host_staging* staging,
                        const std::vector<table_setup>& tables, int32_t shards) {
  pipeline_.drop();
  for (auto& table : rows_)
    table.exchange->cancel();
  pipeline_.carry_rows({});
  rows_.clear();
  report_ = step_report{};
  report_.run = run;
  report_.worker = settings_.worker;
  names_.clear();
  for (auto& v : variables)
    names_.push_back(v.name);
  buffers_.reset(router, staging, variables.size(), settings_.precision, settings_.push_topk);
  pipeline_.reset(router);
  rows_.resize(tables.size());
  row_pointers_.clear();
  std::vector<step_pipeline::carried_rows> carried;
  for (size_t t = 0; t < tables.size(); ++t) {
    auto& table = rows_[t];
    table.dim = tables[t].table.dim;
    table.exchange = std::make_unique<row_exchange>(exchange_, tables[t].table, shards,
                                                    static_cast<int32_t>(t), table.dim);
    carried.push_back({table.exchange.get(), &table.batch});
    row_pointers_.push_back(&table.batch);
  }
  pipeline_.carry_rows(std::move(carried));
}

void worker_step::read_from(example_stream* data, model* net) {
  data_ = data;
  net_ = net;
}

step_report worker_step::ask() const {
  auto out = report_;
  out.step = -1;
  out.applied = false;
  return out;
}

void worker_step::drop() {
  pipeline_.drop();
  for (auto& table : rows_)
    table.exchange->cancel();
}

// A table model reads its batch before the step's pull: the pull carries
// the rows of the batch's distinct keys with the values.
void worker_step::begin(const step_grant& grant) {
  began_ = std::chrono::steady_clock::now();
  report_.step = grant.step;
  report_.applied = false;
  proof_ = grant.proof;
  if (!rows_.empty() && !data_ && net_ && net_->brings_batches() && !take_program_keys())
    return;
  if (!rows_.empty() && data_) {
    if (rows_.size() > 1) { // model::batch_keys names one table's keys
      hooks_.fail("a model that reads its own batches",
                  {errc::invalid_request,
                   "it looks up one embedding table, not " + std::to_string(rows_.size())},
                  run_end::config);
      return;
    }
    if (!read_batch())
      return;
    net_->batch_keys(batch_, rows_[0].ids);
    rows_[0].batch.keys.assign(rows_[0].ids.data(), rows_[0].ids.size());
  }
  pipeline_.begin(report_.run);
}

bool worker_step::take_program_keys() {
  try {
    net_->next_batch_keys(row_pointers_);
  } catch (const std::exception& e) {
    hooks_.fail("its program gave no keys for step " + std::to_string(report_.step),
                failure{errc::invalid_request, e.what()}, run_end::failed);
    return false;
  }
  return true;
}

void worker_step::pulled() {
  pulled_ = std::chrono::steady_clock::now();
  pipeline_.before_compute(report_.run);
  if (rows_.empty() && data_ && !read_batch())
    return;
  if (settings_.max_norm > 0)
    for (auto& table : rows_)
      clip_rows(table.batch.values.data(), table.batch.keys.size(), table.dim,
                static_cast<float>(settings_.max_norm), table.clip_scales);
  hooks_.compute();
}

bool worker_step::read_batch() {
  try {
    data_->next_batch(batch_);
  } catch (const std::exception& e) {
    hooks_.fail("reading its data failed at step " + std::to_string(report_.step),
                failure{errc::invalid_request, e.what()}, run_end::bad_data);
    return false;
  }
  auto position = data_->position();
  if (report_.share_count > 0
      && (static_cast<size_t>(report_.share_rank) != position.share.rank
          || static_cast<size_t>(report_.share_count) != position.share.count))
    spdlog::info("{}: epoch {} reads share {} of {} of the data", label_, position.epoch,
                 position.share.rank, position.share.count);
  report_.data_epoch = position.epoch;
  report_.data_offset = position.offset;
  report_.share_rank = static_cast<int32_t>(position.share.rank);
  report_.share_count = static_cast<int32_t>(position.share.count);
  return true;
}

worker_step::durations worker_step::took(std::chrono::steady_clock::time_point end) const {
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  return {seconds(end - began_), seconds(pulled_ - began_), seconds(end - computed_)};
}

void worker_step::computed(const batch_stats& stats) {
  computed_ = std::chrono::steady_clock::now();
  report_.loss = stats.loss;
  report_.correct = stats.correct;
  report_.examples = stats.examples;
  auto* staging = buffers_.staging();
  auto bad = staging ? guard_.check_and_clip(*staging, stats.gradient_norm)
                     : guard_.check_and_clip(buffers_.grads(), stats.gradient_norm);
  if (bad)
    spdlog::warn("{}: step {}: gradient of {} is not finite (loss {}); nothing pushed", label_,
                 report_.step, *bad < names_.size() ? names_[*bad] : "a variable", report_.loss);
  if (!bad && settings_.max_norm > 0)
    for (auto& table : rows_)
      clip_rows_backward(table.batch.values.data(), table.batch.keys.size(), table.dim,
                         table.clip_scales, table.batch.grads.data());
  push_header step{report_.run, settings_.worker, report_.step, proof_};
  pipeline_.computed(step, report_, !bad);
}

} // namespace troupe
