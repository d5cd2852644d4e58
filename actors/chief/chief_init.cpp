// The chief's first duty: place the variables, then initialise every shard
// exactly once with values derived from the seed, and hand the plan to the
// workers that are waiting for it.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"

namespace troupe::chief_run {

namespace {

void on_initialized(self_ptr self) {
  auto& st = self->state;
  if (st.now != chief_state::phase::initializing)
    return;
  if (st.first_step >= st.config.train.last_step) {
    spdlog::warn("chief: the checkpoint is at step {}, at or past last_step {}: nothing to "
                 "train (raise train.last-step to train on); each worker is told to stop as it "
                 "connects",
                 st.first_step, st.config.train.last_step);
    st.nothing_to_train = true; // workers' ready requests wait; finish stops them
    finish_when_every_worker_came(self);
    return;
  }
  st.now = chief_state::phase::training;
  st.steps->shards_ready(self);
  spdlog::info("chief: initialised {} variable(s) on {} shard(s); {} worker(s) waiting",
               st.router->plan().size(), st.links.shards.size(), st.waiting_ready.size());
  if (st.replan_workers) { // after a recovery: the live workers wait for the new run
    st.replan_workers = false;
    for (auto& [index, addr] : st.roster->live())
      if (auto w = caf::actor_cast<worker_actor>(addr))
        self->send(w, plan_atom::value, plan_message(self, index));
  }
  for (auto& [index, rp] : st.waiting_ready)
    rp.deliver(plan_message(self, index));
  st.waiting_ready.clear();
}

} // namespace

void finish_when_every_worker_came(self_ptr self) {
  auto& st = self->state;
  if (!st.nothing_to_train || st.now != chief_state::phase::initializing)
    return;
  auto waited = chief_state::clock::now() - st.created;
  if (st.roster->live().size() < static_cast<size_t>(st.config.num_workers)
      && waited < st.config.runtime.connect_timeout)
    return;
  finish(self);
}

training_plan plan_message(self_ptr self, int32_t index) {
  auto& st = self->state;
  training_plan plan;
  plan.run = st.run;
  plan.slices = st.router->plan();
  plan.coordinator = st.coordinator;
  plan.lease = st.steps->lease();
  plan.report_every = st.config.train.report_every; // above 1 only in async mode (checked)
  plan.tables = st.tables;
  plan.sync = st.config.train.mode == update_mode::sync;
  if (auto admission = st.admission_of.find(index);
      st.report_desk && admission != st.admission_of.end()) {
    plan.report_port = st.report_desk->port();
    plan.report_ticket = st.report_desk->issue_ticket(index, admission->second);
  }
  auto now = st.membership->share_of(index);
  plan.share_rank = plan.next_share_rank = now.rank;
  plan.share_count = plan.next_share_count = now.count;
  // A worker continues the epoch it was in, in the share it read there.
  if (auto i = st.data_positions.find(index); i != st.data_positions.end()) {
    auto& p = i->second;
    plan.data_epoch = p.epoch;
    plan.data_offset = p.offset;
    plan.share_rank = p.share_count > 0 ? p.share_rank : index;
    plan.share_count = p.share_count > 0 ? p.share_count : st.config.num_workers;
  }
  return plan;
}

namespace {

// The shards every step pushes to: those holding a slice, and, with
// embedding tables, every shard (each holds its buckets of each table).
std::vector<int32_t> step_shards(const slice_router& router, const std::vector<table_setup>& tables,
                                 int32_t shards) {
  std::vector<int32_t> out;
  for (int32_t s = 0; s < shards; ++s) {
    bool slices = std::any_of(router.parts().begin(), router.parts().end(),
                              [s](const slice_router::shard_part& p) { return p.shard == s; });
    if (slices || !tables.empty())
      out.push_back(s);
  }
  return out;
}

} // namespace

void initialize_shards(self_ptr self) {
  auto& st = self->state;
  auto& t = st.config.train;
  auto& vars = st.links.net->variables();
  auto num_shards = static_cast<int32_t>(st.links.shards.size());
  auto placement = plan_placement(t.placement, vars, num_shards, t.placement_epsilon,
                                  t.partitioners);
  for (auto& p : placement)
    spdlog::info("chief: {} {} -> ps:{}", p.slice.name, to_string(p.slice.shape), p.shard);
  spdlog::info("chief: placement {}: imbalance of bytes held {:.3f}", name_of(t.placement),
               imbalance(placement, num_shards));
  st.router.emplace(build_plan(placement, vars), vars, num_shards);
  st.tables.clear();
  for (auto& table : st.links.net->tables())
    st.tables.push_back(table_setup_of(t.embedding, table, t.seed));
  st.receipts = step_receipts{st.signing_key, st.run,
                              step_shards(*st.router, st.tables, num_shards)};
  shard_options options;
  st.coordinator = st.steps->begin(self, options);
  options.tables = st.tables;
  options.shards = num_shards;
  options.first_step = st.first_step;
  options.grant_key0 = st.signing_key.k0;
  options.grant_key1 = st.signing_key.k1;
  // Each variable's first value, computed once (or the declaring program's), or restored.
  std::vector<tensor> full;
  auto* declared = st.links.net->declaration();
  for (size_t v = 0; v < vars.size(); ++v)
    full.push_back(st.links.restore_from ? st.links.restore_from->assemble(vars[v].name)
                   : declared            ? declared->initial[v]
                                         : initial_value(vars[v], t.seed));
  std::vector<std::vector<std::string>> names(st.links.shards.size());
  std::vector<std::vector<tensor>> values(st.links.shards.size());
  for (auto& part : st.router->parts()) {
    names[static_cast<size_t>(part.shard)] = part.names;
    values[static_cast<size_t>(part.shard)] = st.router->cut(part, full);
  }
  auto join = make_fan_in(st.links.shards.size(), [self] {
    if (self->state.links.restore_from)
      restore_slots(self, [self] { restore_tables(self, [self] { on_initialized(self); }); });
    else
      on_initialized(self);
  });
  for (size_t s = 0; s < st.links.shards.size(); ++s) {
    auto shard_opts = options; // a shard holding nothing applies no update
    if (names[s].empty() && st.tables.empty())
      shard_opts.first_step = 0;
    self
      ->request(st.links.shards[s], st.config.runtime.request_timeout, init_atom::value, st.run,
                std::move(names[s]), std::move(values[s]), shard_opts)
      .then([join](caf::ok_atom) { join->arrive(); },
            [self, s](caf::error& err) {
              abort_run(self, "initialising ps:" + std::to_string(s) + " failed: " + describe(err));
            });
  }
}

} // namespace troupe::chief_run
