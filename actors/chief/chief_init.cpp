// The chief's first duty: place the variables, then initialise every shard
// exactly once with values derived from the seed, and hand the plan to the
// workers that are waiting for it.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "actors/token_queue/token_queue.hpp"

namespace troupe::chief_run {

namespace {

void on_initialized(self_ptr self) {
  auto& st = self->state;
  if (st.now != chief_state::phase::initializing)
    return;
  st.now = chief_state::phase::training;
  if (is_sync(self)) // sync steps start now; async ones at the first grant
    start_clock(self);
  spdlog::info("chief: initialised {} variable(s) on {} shard(s); {} worker(s) waiting",
               st.router->plan().size(), st.links.shards.size(), st.waiting_ready.size());
  for (auto& rp : st.waiting_ready)
    rp.deliver(plan_message(self));
  st.waiting_ready.clear();
}

} // namespace

training_plan plan_message(self_ptr self) {
  return {self->state.run, self->state.router->plan(), self->state.coordinator};
}

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
  shard_options options;
  st.coordinator = caf::actor_cast<step_coordinator_actor>(self);
  if (is_sync(self)) {
    token_queue_config queue{st.run, t.last_step, {}};
    for (auto& part : st.router->parts())
      queue.shards.push_back(st.links.shards[static_cast<size_t>(part.shard)].address());
    st.token_queue = self->spawn<caf::linked>(token_queue, queue,
                                              caf::actor_cast<chief_actor>(self));
    st.coordinator = st.token_queue;
    options = shard_options{true, st.config.replicas, t.last_step, st.token_queue};
    spdlog::info("chief: sync mode: averaging {} of {} workers' gradients per step",
                 st.config.replicas, st.config.num_workers);
  }
  std::vector<tensor> full; // each variable's first value, computed once
  for (auto& v : vars)
    full.push_back(initial_value(v, t.seed));
  std::vector<std::vector<std::string>> names(st.links.shards.size());
  std::vector<std::vector<tensor>> values(st.links.shards.size());
  for (auto& part : st.router->parts()) {
    names[static_cast<size_t>(part.shard)] = part.names;
    values[static_cast<size_t>(part.shard)] = st.router->cut(part, full);
  }
  auto join = make_fan_in(st.links.shards.size(), [self] { on_initialized(self); });
  for (size_t s = 0; s < st.links.shards.size(); ++s)
    self
      ->request(st.links.shards[s], st.config.runtime.request_timeout, init_atom::value, st.run,
                std::move(names[s]), std::move(values[s]), options)
      .then([join](caf::ok_atom) { join->arrive(); },
            [self, s](caf::error& err) {
              abort_run(self, "initialising ps:" + std::to_string(s) + " failed: " + describe(err));
            });
}

} // namespace troupe::chief_run
