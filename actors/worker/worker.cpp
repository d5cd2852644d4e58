#include "actors/worker/worker.hpp"

#include <algorithm>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "tensor/core/error.hpp"
#include "tensor/optim/optimizer.hpp"

namespace troupe {

namespace {

using self_ptr = worker_actor::stateful_pointer<worker_state>;

void fail(self_ptr self, const std::string& what, const caf::error& err) {
  spdlog::error("{}: {}: {}; stopping this worker", self->state.label, what, describe(err));
  self->quit(err);
}

void log_progress(self_ptr self, int64_t global_step) {
  auto& st = self->state;
  if (st.config.log_interval <= 0 || st.local_step % st.config.log_interval != 0)
    return;
  auto now = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(now - st.interval_start).count();
  double steps = static_cast<double>(st.config.log_interval);
  spdlog::info("{}: global_step={} local_step={} loss={:.4f} batch_accuracy={:.4f} "
               "examples/s={:.0f}",
               st.label, global_step + 1, st.local_step, st.interval_loss / steps,
               st.interval_examples ? static_cast<double>(st.interval_correct)
                                        / static_cast<double>(st.interval_examples)
                                    : 0.0,
               secs > 0 ? static_cast<double>(st.interval_examples) / secs : 0.0);
  st.interval_start = now;
  st.interval_examples = 0;
  st.interval_loss = 0;
  st.interval_correct = 0;
}

void push_all(self_ptr self);

void compute(self_ptr self) {
  auto& st = self->state;
  st.sampler->next_batch(*st.links.train, static_cast<size_t>(st.config.batch_size),
                         st.current);
  batch_stats stats;
  try {
    stats = st.staging ? st.links.net->train_step_staged(st.current)
                       : st.links.net->train_step(st.params, st.current, st.grads);
  } catch (const std::exception& e) {
    fail(self, "compute failed at step " + std::to_string(st.report.step),
         caf::make_error(caf::sec::runtime_error, e.what()));
    return;
  }
  st.report.loss = stats.loss;
  st.report.correct = stats.correct;
  st.report.examples = stats.examples;
  // Checked here as well as on the shards: a NaN caught by one shard only
  // would leave the update half applied.
  // A finite norm computed on the device already proves every value finite.
  bool proven_finite = stats.gradient_norm >= 0 && std::isfinite(stats.gradient_norm);
  auto& vars = st.links.net->variables();
  auto finite = [&](size_t i) {
    if (!st.staging)
      return st.grads[i].all_finite();
    auto n = st.staging->sizes[i];
    return first_non_finite(st.staging->grads[i], n) == n;
  };
  for (size_t i = 0; i < vars.size() && !proven_finite; ++i)
    if (!finite(i)) {
      spdlog::warn("{}: step {}: gradient of {} is not finite (loss {}); nothing pushed",
                   st.label, st.report.step, vars[i].name, st.report.loss);
      st.report.applied = false;
      // The chief decides: re-grant (async) or end the run (sync, where no
      // step can complete without this worker's gradient).
      st.report_to_chief = true;
      self->send(self, run_atom::value);
      return;
    }
  if (st.config.clip_norm > 0) {
    if (st.staging)
      clip_by_global_norm(st.staging->grads, st.staging->sizes, st.config.clip_norm,
                          stats.gradient_norm);
    else
      clip_by_global_norm(st.grads, st.config.clip_norm, stats.gradient_norm);
  }
  push_all(self);
}

// A refused update (e.g. a NaN gradient) is reported, not fatal: the chief
// grants the step again and gives up after too many refusals.
void on_push_done(self_ptr self, bool applied) {
  auto& st = self->state;
  st.report.applied = st.report.applied && applied;
  if (--st.pending > 0)
    return;
  if (st.report.applied) {
    ++st.local_step;
    st.interval_examples += st.report.examples;
    st.interval_loss += st.report.loss;
    st.interval_correct += st.report.correct;
    log_progress(self, st.report.step);
  }
  self->send(self, run_atom::value);
}

void push_all(self_ptr self) {
  auto& st = self->state;
  st.report.applied = true;
  st.pending = st.slices.size();
  for (size_t s = 0; s < st.slices.size(); ++s) {
    auto& slice = st.slices[s];
    std::vector<tensor> grads;
    grads.reserve(slice.indices.size());
    for (auto i : slice.indices) {
      auto& part = st.plan_slices[i];
      auto v = static_cast<size_t>(st.plan.variable_of[i]);
      if (st.staging) {
        grads.push_back(extract_slice(part, st.staging->grads[v]));
        continue;
      }
      // A whole variable's gradient moves; a slice's rows are copied.
      auto& full = st.grads[v];
      grads.push_back(part.shape == part.full_shape ? std::move(full) : extract_slice(part, full));
    }
    self->request(st.links.shards[s], st.config.request_timeout, push_atom::value,
                  st.config.index, st.report.step, slice.names, std::move(grads))
      .then([self](int64_t) { on_push_done(self, true); },
            [self, s](caf::error& err) {
              auto code = static_cast<errc>(err.code());
              if (err.category() == caf::atom("troupe") && code != errc::not_initialized) {
                // Stale (a backup's late gradient) and past-the-end pushes are
                // part of sync training; anything else is worth a warning.
                if (code == errc::stale_gradient || code == errc::training_stopped)
                  spdlog::debug("{}: {}", self->state.label, describe(err));
                else
                  spdlog::warn("{}: ps:{} refused step {}: {}", self->state.label, s,
                               self->state.report.step, describe(err));
                on_push_done(self, false);
                return;
              }
              fail(self, "push to ps:" + std::to_string(s) + " failed", err);
            });
  }
}

void pull_all(self_ptr self) {
  auto& st = self->state;
  st.pending = st.slices.size();
  for (size_t s = 0; s < st.slices.size(); ++s) {
    self->request(st.links.shards[s], st.config.request_timeout, pull_atom::value,
                  st.slices[s].names)
      .then(
        [self, s](pull_reply& reply) {
          auto& st = self->state;
          auto& indices = st.slices[s].indices;
          if (reply.values.size() != indices.size()) {
            fail(self, "pull from ps:" + std::to_string(s),
                 make_error({errc::invalid_request, "answered with the wrong number of values"}));
            return;
          }
          try {
            // plan_slices were derived once from the plan: no per-step work.
            for (size_t k = 0; k < indices.size(); ++k) {
              auto i = indices[k];
              auto v = static_cast<size_t>(st.plan.variable_of[i]);
              if (st.staging)
                insert_slice(st.plan_slices[i], reply.values[k], st.staging->params[v]);
              else
                gather_slice(st.plan_slices[i], std::move(reply.values[k]), st.params[v]);
            }
          } catch (const std::exception& e) {
            fail(self, "pull from ps:" + std::to_string(s),
                 make_error({errc::invalid_request, e.what()}));
            return;
          }
          if (--st.pending == 0)
            compute(self);
        },
        [self, s](caf::error& err) { fail(self, "pull from ps:" + std::to_string(s), err); });
  }
}

void on_plan(self_ptr self, const training_plan& plan) {
  auto& st = self->state;
  auto& vars = st.links.net->variables();
  st.plan = plan;
  st.plan_slices.clear();
  st.slices.assign(st.links.shards.size(), {});
  try {
    // Each variable's slices as (offset, rows): they must tile it exactly,
    // or rows would go untrained (never written when pulls land in a GPU
    // model's buffers) and others be pushed twice.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> pieces(vars.size());
    std::vector<int32_t> axis_of(vars.size(), -1);
    for (size_t i = 0; i < plan.variables.size(); ++i) {
      st.plan_slices.push_back(plan_slice(plan, i, vars));
      auto shard = plan.shard_of[i];
      if (shard < 0 || static_cast<size_t>(shard) >= st.slices.size())
        throw troupe_error("slice " + plan.variables[i] + " is on ps:" + std::to_string(shard)
                           + ", but this worker knows " + std::to_string(st.slices.size())
                           + " shard(s)");
      auto& slice = st.plan_slices.back();
      auto var = static_cast<size_t>(plan.variable_of[i]);
      if (axis_of[var] >= 0 && axis_of[var] != slice.axis)
        throw troupe_error(vars[var].name + " is split along two axes");
      axis_of[var] = slice.axis;
      pieces[var].emplace_back(slice.offset, plan.rows_of[i]);
      st.slices[shard].names.push_back(plan.variables[i]);
      st.slices[shard].indices.push_back(i);
    }
    for (size_t v = 0; v < vars.size(); ++v) {
      auto dim = vars[v].shape.empty()
                   ? 1
                   : vars[v].shape[static_cast<size_t>(std::max(axis_of[v], 0))];
      std::sort(pieces[v].begin(), pieces[v].end());
      int64_t next = 0;  // the first row not yet covered; -1 once a piece overlaps or skips
      for (auto [offset, rows] : pieces[v])
        next = offset == next ? next + rows : -1;
      if (next != dim)
        throw troupe_error("the plan's slices do not cover " + vars[v].name + " exactly once");
    }
  } catch (const std::exception& e) {
    fail(self, "the chief's plan does not match this worker's model (" + st.links.net->name()
                 + ")",
         make_error({errc::invalid_request, e.what()}));
    return;
  }
  // Drop shards holding nothing, so that no empty request is sent.
  std::vector<ps_shard_actor> shards;
  std::vector<shard_slice> slices;
  for (size_t s = 0; s < st.slices.size(); ++s)
    if (!st.slices[s].names.empty()) {
      shards.push_back(st.links.shards[s]);
      slices.push_back(std::move(st.slices[s]));
    }
  st.links.shards = std::move(shards);
  st.slices = std::move(slices);
  st.staging = st.links.net->staging();
  st.params.resize(vars.size());
  st.grads.resize(vars.size());
  st.coordinator = plan.coordinator;
  if (!st.coordinator) {
    fail(self, "the chief's plan names no step coordinator",
         make_error({errc::invalid_request, "empty coordinator"}));
    return;
  }
  st.interval_start = std::chrono::steady_clock::now();
  spdlog::info("{}: ready; training on {} of {} examples", st.label, st.sampler->shard_size(),
               st.links.train->size());
  self->send(self, run_atom::value);
}

} // namespace

worker_actor::behavior_type worker(worker_actor::stateful_pointer<worker_state> self,
                                   worker_config config, worker_links links) {
  auto& st = self->state;
  st.label = "worker:" + std::to_string(config.index);
  st.config = config;
  st.links = std::move(links);
  st.sampler.emplace(st.links.train->size(), static_cast<size_t>(config.index),
                     static_cast<size_t>(config.num_workers), config.seed, config.shuffle);
  st.report.worker = config.index;
  self->monitor(st.links.chief);
  for (auto& shard : st.links.shards)
    self->monitor(shard);
  self->set_down_handler([self](const caf::down_msg& msg) {
    if (msg.reason == caf::exit_reason::normal)
      return; // the chief's stop grant follows, or the shard finished with the run
    fail(self, "lost a peer", msg.reason);
  });
  self->request(st.links.chief, config.ready_timeout, ready_atom::value, config.index)
    .then([self](const training_plan& plan) { on_plan(self, plan); },
          [self](caf::error& err) { fail(self, "the chief refused the ready request", err); });
  return {
    [self](hello_atom, uint32_t version, const std::string& job,
           int32_t task) -> caf::result<uint32_t> {
      return answer_hello(version, job, task, self->state.label);
    },
    [self](run_atom) {
      auto& st = self->state;
      step_coordinator_actor to = st.coordinator;
      if (st.report_to_chief)
        to = st.links.chief;
      st.report_to_chief = false;
      self->request(to, st.config.step_timeout, report_atom::value, st.report)
        .then(
          [self](const step_grant& grant) {
            auto& st = self->state;
            if (grant.stop) {
              spdlog::info("{}: stop after {} local step(s)", st.label, st.local_step);
              self->quit(caf::exit_reason::normal);
              return;
            }
            st.report.step = grant.step;
            st.report.applied = false;
            pull_all(self);
          },
          [self](caf::error& err) { fail(self, "waiting for the next step failed", err); });
    },
    [self](stop_atom) {
      spdlog::info("{}: stopped by the chief after {} local step(s)", self->state.label,
                   self->state.local_step);
      self->quit(caf::exit_reason::normal);
    },
  };
}

} // namespace troupe
