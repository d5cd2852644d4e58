#include "actors/worker/step_pipeline.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

namespace troupe {

namespace {

std::string ps_name(int32_t shard) {
  return "ps:" + std::to_string(shard);
}

} // namespace

step_pipeline::step_pipeline(shard_exchange& exchange, param_buffers& buffers, std::string label,
                             bool pull_ahead, step_hooks hooks)
  : exchange_(exchange), buffers_(buffers), label_(std::move(label)), pull_ahead_(pull_ahead),
    hooks_(std::move(hooks)) {
}

void step_pipeline::reset(const slice_router& router) {
  drop();
  router_ = &router;
}

void step_pipeline::carry_rows(std::vector<carried_rows> tables) {
  if (!tables.empty() && pull_ahead_)
    throw std::invalid_argument("train.pull-ahead does not apply to a model with embedding tables");
  rows_ = std::move(tables);
}

void step_pipeline::drop() {
  exchange_.cancel();
  job_ = {};
  values_ready_ = false;
}

std::vector<exchange_part> step_pipeline::parts(bool with_gradients) {
  std::vector<exchange_part> out;
  for (auto& part : router_->parts()) {
    exchange_part p;
    p.shard = part.shard;
    p.names = &part.names;
    if (with_gradients)
      p.gradients = buffers_.cut(part);
    out.push_back(std::move(p));
  }
  return out;
}

push_header step_pipeline::stamped(push_header header) const {
  header.precision = buffers_.precision();
  header.topk = buffers_.sparsifies();
  return header;
}

void step_pipeline::begin(uint64_t run) {
  if (values_ready_) {
    values_ready_ = false;
    hooks_.compute();
    return;
  }
  pull_now(run);
}

void step_pipeline::pull_now(uint64_t run) {
  auto out = parts(false);
  for (size_t k = 0; k < out.size(); ++k)
    out[k].storage = buffers_.lend(router_->parts()[k]);
  for (auto& table : rows_)
    table.exchange->ask_pull(*table.batch, out);
  exchange_.start(exchange_kind::pull, stamped({run, 0, 0, 0}), std::move(out), false);
  exchange_.finish([this](std::vector<part_outcome>& outcomes) {
    // The router's parts come first; rows may have added parts after them.
    for (size_t k = 0; k < outcomes.size(); ++k)
      if (auto& lost = outcomes[k].lost) {
        hooks_.recover("a pull failed", *lost);
        return;
      }
    for (size_t k = 0; k < router_->parts().size(); ++k)
      if (!settle_pull(router_->parts()[k], outcomes[k], false))
        return;
    for (auto& table : rows_)
      if (auto refused = table.exchange->take_pull(outcomes, *table.batch)) {
        hooks_.fail("a shard's answer to the pull of embedding rows", *refused, run_end::failed);
        return;
      }
    hooks_.compute();
  });
}

void step_pipeline::before_compute(uint64_t run) {
  if (pull_ahead_ && !job_.active)
    start_job(stamped({run, 0, 0, 0}), {}, false);
}

void step_pipeline::computed(const push_header& step, const step_report& report, bool pushable) {
  if (pull_ahead_) {
    collect([this, step, report, pushable] {
      start_job(step, report, pushable);
      if (!pushable)
        hooks_.nonfinite();
      hooks_.over();
    });
    return;
  }
  if (pushable) {
    push_now(step, report);
    return;
  }
  hooks_.nonfinite();
  hooks_.over();
}

// The step's parts, dense values and rows together, one push a shard; the
// report shows the receipts of every shard that took its part.
void step_pipeline::push_now(const push_header& step, const step_report& report) {
  auto out = parts(true);
  for (auto& table : rows_)
    table.exchange->ask_push(*table.batch, out);
  std::vector<int32_t> shards;
  for (auto& part : out)
    shards.push_back(part.shard);
  exchange_.start(exchange_kind::push, stamped(step), std::move(out), false);
  exchange_.finish([this, pushed = report, shards](std::vector<part_outcome>& outcomes) mutable {
    pushed.applied = true;
    pushed.receipt = 0;
    auto& router_parts = router_->parts();
    for (size_t k = 0; k < outcomes.size(); ++k) {
      if (k < router_parts.size())
        buffers_.give_back(router_parts[k], outcomes[k].gradients, false);
      if (!settle_push(shards[k], outcomes[k], pushed))
        return;
    }
    hooks_.report(pushed);
    hooks_.over();
  });
}

void step_pipeline::start_job(const push_header& step, const step_report& report,
                              bool with_pushes) {
  job_.active = true;
  job_.pushes = with_pushes;
  job_.report = report;
  job_.report.applied = with_pushes;
  exchange_.start(with_pushes ? exchange_kind::push_then_pull : exchange_kind::pull, stamped(step),
                  parts(with_pushes), true);
  // The gradients the job before sent serve this step's successor.
  buffers_.reuse_spare();
}

void step_pipeline::collect(std::function<void()> then) {
  if (!job_.active) {
    then();
    return;
  }
  exchange_.finish([this, then = std::move(then)](std::vector<part_outcome>& outcomes) {
    job_.report.receipt = 0;
    for (size_t k = 0; k < outcomes.size(); ++k) {
      auto& part = router_->parts()[k];
      if (job_.pushes) {
        buffers_.give_back(part, outcomes[k].gradients, true);
        if (!settle_push(part.shard, outcomes[k], job_.report))
          return;
      }
      if (!settle_pull(part, outcomes[k], true))
        return;
    }
    job_.active = false;
    values_ready_ = true;
    if (job_.pushes)
      hooks_.report(job_.report);
    then();
  });
}

void step_pipeline::flush() {
  collect([this] {
    values_ready_ = false;
    hooks_.over();
  });
}

// A part's pulled values into the parameters, and their storage back to the
// exchange for the next pull. False once the worker recovers or stops.
bool step_pipeline::settle_pull(const slice_router::shard_part& part, part_outcome& outcome,
                                bool ahead) {
  if (outcome.lost) {
    hooks_.recover("pull from " + ps_name(part.shard) + " failed", *outcome.lost);
    return false;
  }
  auto err = ahead ? buffers_.take_ahead(part, outcome.values)
                   : buffers_.take(part, outcome.values);
  if (err) {
    hooks_.fail("pull from " + ps_name(part.shard), *err, run_end::failed);
    return false;
  }
  exchange_.give_back(part.shard, std::move(outcome.values));
  return true;
}

// A refused part (stale, past the end, or a faulty gradient) is reported as
// not applied, not fatal: the coordinator decides what follows. A lost
// shard, or one not initialised (restarted), starts recovery.
bool step_pipeline::settle_push(int32_t shard, const part_outcome& outcome, step_report& report) {
  if (outcome.lost) {
    hooks_.recover("push to " + ps_name(shard) + " failed", *outcome.lost);
    return false;
  }
  if (!outcome.refused) {
    report.receipt ^= outcome.receipt;
    return true;
  }
  auto code = outcome.refused->code;
  if (code == errc::not_initialized) {
    hooks_.recover("push to " + ps_name(shard) + " failed", outcome.refused->message);
    return false;
  }
  // Stale (a backup's late gradient) and past-the-end pushes are part of sync
  // training; anything else is worth a warning.
  if (code == errc::stale_gradient || code == errc::training_stopped)
    spdlog::debug("{}: {}", label_, outcome.refused->message);
  else
    spdlog::warn("{}: {} refused step {}: {}", label_, ps_name(shard), report.step,
                 outcome.refused->message);
  report.applied = false;
  return true;
}

} // namespace troupe
