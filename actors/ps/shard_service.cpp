#include "actors/ps/shard_service.hpp"

#include <algorithm>

#include "tensor/core/wire_precision.hpp"

namespace troupe {

shard_service::shard_service(std::string label, int32_t index, const optimizer_config& optimizer)
  : label_(std::move(label)), index_(index), store_(label_, optimizer), traffic_(index) {
}

maybe_failure shard_service::initialize(run_id run, const std::vector<std::string>& names,
                                        std::vector<tensor> values, const shard_setup& setup) {
  if (setup.first_step < 0)
    return failure{errc::invalid_request, label_ + ": init at a negative step"};
  if (store_.initialized())
    return failure{errc::already_initialized,
                   label_ + " is already initialised; the chief initialises exactly once"};
  copy_.clear(); // a copy's views of the tables end before the tables do
  tables_.reset();
  if (!setup.tables.empty())
    if (auto err = tables_.configure(setup.tables, index_, setup.shards, setup.sync,
                                     setup.first_step))
      return err;
  if (auto err = store_.initialize(names, std::move(values), setup.first_step, run)) {
    tables_.reset();
    return err;
  }
  run_ = run;
  key_ = setup.key;
  if (setup.sync) {
    rule_ = update_rule::sync(setup.replicas, setup.first_step, setup.last_step);
    sums_.emplace(names);
  } else {
    rule_ = update_rule::async(setup.first_step);
    sums_.reset();
  }
  return std::nullopt;
}

void shard_service::reset() {
  store_.reset();
  copy_.clear(); // its views of the tables end before the tables do
  tables_.reset();
  rule_.reset();
  sums_.reset();
  key_ = {};
  run_ = 0;
}

maybe_failure shard_service::restore_slot(run_id run, const std::string& key, tensor value) {
  if (auto why = store_.other_run(run))
    return failure{errc::unauthorized, label_ + ": " + *why};
  return store_.restore_slot(key, std::move(value));
}

maybe_failure shard_service::restore_rows(run_id run, const restored_rows& rows) {
  if (auto why = store_.other_run(run))
    return failure{errc::unauthorized, label_ + ": " + *why};
  return tables_.restore(rows.table, rows.keys, rows.frequencies, rows.last_updates, rows.payloads);
}

void shard_service::revoke(int32_t worker, int64_t step) {
  if (rule_)
    rule_->revoke(worker, step);
}

bool shard_service::set_required(int32_t required) {
  if (!rule_ || !rule_->is_sync() || required < 1)
    return false;
  rule_->set_required(required);
  if (!rule_->ready())
    return false;
  apply_step();
  return true;
}

// -- requests ------------------------------------------------------------------

maybe_failure shard_service::pull(const pull_request& request, pulled& out) {
  if (auto why = store_.other_run(request.run))
    return failure{errc::unauthorized, label_ + " refused a pull: " + *why};
  if (auto err = store_.pin(request.run, request.names, out.values, out.version, request.precision))
    return err;
  out.rows.resize(request.tables.size());
  size_t keys = 0, row_bytes = 0;
  for (size_t t = 0; t < request.tables.size(); ++t) {
    auto& asked = request.tables[t];
    if (auto err = tables_.lookup(asked.table, asked.keys, out.rows[t]))
      return err;
    keys += asked.keys.size();
    row_bytes += out.rows[t].bytes();
  }
  traffic_.pulled(request.names, out.values, keys, row_bytes);
  return std::nullopt;
}

push_outcome shard_service::refusal(failure why) const {
  push_outcome out;
  out.refused = std::move(why);
  return out;
}

push_outcome shard_service::push(const step_push& push) {
  if (auto why = admit(push))
    return refusal(std::move(*why));
  traffic_.pushed(push);
  push_outcome out;
  out.answer.receipt = key_.empty() ? 0 : step_receipt(key_, run_, push.worker, push.step, index_);
  auto verdict = rule_->judge(push.worker, push.step);
  if (verdict == push_verdict::repeated) {
    // Applied already (async: granted again, or replayed), or this worker's
    // push of the step is in (sync): nothing changes.
    traffic_.repeated_push();
  } else if (verdict != push_verdict::take) {
    return refusal(judged(verdict, push));
  } else if (auto why = take(push, out)) {
    return refusal(std::move(*why));
  }
  out.answer.version = store_.version();
  return out;
}

// Whether a push may be judged at all: the shard initialised, the run its
// own, the grant proof that of the step for that worker.
maybe_failure shard_service::admit(const step_push& push) {
  if (!rule_)
    return failure{errc::not_initialized,
                   label_ + " is not initialised yet; wait for the chief's ready answer"};
  if (auto why = store_.other_run(push.run))
    return failure{errc::unauthorized, label_ + " refused a push: " + *why};
  if (!key_.empty() && push.proof != grant_proof(key_, run_, push.worker, push.step)) {
    traffic_.unauthorized_push();
    return failure{errc::unauthorized,
                   label_ + " refused a push of " + step_of(push)
                     + ": its grant proof is not the one of that step for that worker: nobody "
                       "granted it"};
  }
  return std::nullopt;
}

// Why the update rule will not take a push (anything but take and repeated).
failure shard_service::judged(push_verdict verdict, const step_push& push) {
  auto of = step_of(push);
  switch (verdict) {
    case push_verdict::stale:
      rule_->drop();
      return {errc::stale_gradient, "the push of " + of + " is stale: " + label_ + " is at step "
                                      + std::to_string(rule_->step()) + "; dropped"};
    case push_verdict::ahead:
      return {errc::invalid_request,
              of + " is ahead of " + label_ + " (at step " + std::to_string(rule_->step()) + ")"};
    case push_verdict::past_end:
      return {errc::training_stopped,
              "step " + std::to_string(push.step) + " is past last_step on " + label_};
    case push_verdict::revoked:
      return {errc::unauthorized, label_ + " refused the push of " + of
                                    + ": the chief took that grant back (it was held too long) "
                                      "and gave the step to another worker"};
    default:
      return {errc::invalid_request, of + ": no verdict to refuse it by"};
  }
}

// A push the rule takes: checked whole, then applied (async) or added to
// the step's sums (sync), which complete the step once R are in.
maybe_failure shard_service::take(const step_push& push, push_outcome& out) {
  // Packed gradients are widened into the service's own storage first; the
  // optimizer and the sums see fp32 only.
  const std::vector<tensor>* gradients = &push.gradients;
  if (push.precision != static_cast<int32_t>(wire_precision::fp32)) {
    if (auto err = store_.widen_gradients(push.names, push.precision, push.gradients, widened_))
      return err;
    gradients = &widened_;
  }
  if (auto err = check(push, *gradients))
    return err;
  if (!rule_->is_sync()) {
    for (auto& rows : push.tables)
      tables_.apply(rows);
    store_.apply_checked(push.names, *gradients);
    rule_->took(push.worker, push.step);
    return std::nullopt;
  }
  if (!push.names.empty())
    sums_->add(*gradients);
  for (auto& rows : push.tables)
    tables_.add(rows);
  rule_->took(push.worker, push.step);
  if (rule_->ready()) {
    apply_step();
    out.completed = true;
  }
  return std::nullopt;
}

// Every part of a push, before any part is taken: the dense gradients
// against their variables (a sync push names every variable of the shard,
// in order), each table's rows against the table.
maybe_failure shard_service::check(const step_push& push,
                                   const std::vector<tensor>& gradients) const {
  if (auto err = store_.check_gradients(push.names, gradients))
    return err;
  if (rule_->is_sync() && push.names != sums_->names())
    return failure{errc::invalid_request, "a sync push to " + label_
                                            + " must carry every variable it holds, in the "
                                              "plan's order"};
  for (size_t t = 0; t < push.tables.size(); ++t) {
    for (size_t u = 0; u < t; ++u)
      if (push.tables[u].table == push.tables[t].table)
        return failure{errc::invalid_request, "a push to " + label_ + " names table "
                                                + std::to_string(push.tables[t].table) + " twice"};
    if (auto err = tables_.check(push.tables[t]))
      return err;
  }
  return std::nullopt;
}

void shard_service::apply_step() {
  tables_.apply_step(rule_->count());
  auto mean = sums_->take_average();
  store_.apply_checked(sums_->names(), mean);
  rule_->advance();
}

snapshot_index shard_service::take_copy(uint64_t ticket) {
  std::vector<table_snapshot> tables;
  size_t piece_rows = size_t{1} << 20;
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables.emplace_back(tables_.table(t));
    piece_rows = std::min(piece_rows, static_cast<size_t>(tables_.max_keys(t)));
  }
  copy_.clear(); // the earlier views end before new ones begin
  return copy_.take(store_.take_snapshot(), ticket, std::move(tables), piece_rows);
}

std::variant<tensor, failure> shard_service::fetch(run_id run, uint64_t ticket, int32_t index,
                                                   int64_t* version) {
  return copy_.fetch(store_, run, label_, ticket, index, version);
}

shard_traffic shard_service::stats(int32_t shard) const {
  auto out = traffic_.report(shard, store_.bytes());
  out.updates = store_.version();
  for (size_t t = 0; t < tables_.size(); ++t) {
    auto figures = tables_.figures(t, 10);
    table_report r{tables_.name(t),
                   figures.rows,
                   figures.bytes,
                   figures.admitted,
                   figures.evicted,
                   figures.not_admitted,
                   {},
                   {}};
    for (auto& [key, count] : figures.hottest) {
      r.hottest_keys.push_back(key);
      r.hottest_counts.push_back(count);
    }
    out.tables.push_back(std::move(r));
  }
  return out;
}

} // namespace troupe
