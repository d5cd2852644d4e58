// The chief when a ps shard is lost while training: training pauses, a
// helper waits for the shard to answer at its address again (restarted by
// hand, by a launcher or by Kubernetes), then every shard is restored from
// the latest checkpoint for a new incarnation of the run (a new run id, so
// anything of the old one still in flight is refused), and the live workers
// get the new plan.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "tensor/checkpoint/restore.hpp"

namespace troupe::chief_run {

void on_shard_lost(self_ptr self, size_t shard, const caf::error& reason) {
  auto& st = self->state;
  auto timeout = st.config.runtime.recovery_timeout;
  if (!st.links.reconnect.shard || !st.schedule || timeout.count() == 0) {
    abort_run(self,
              "lost ps:" + std::to_string(shard) + " (" + self->system().render(reason)
                + "); its variables are gone"
                + (st.schedule ? "" : " (set checkpoint.log-dir to recover from a checkpoint)"),
              run_end::lost_peer);
    return;
  }
  st.recovering = chief_state::shard_recovery{static_cast<int32_t>(shard), global_step(self),
                                              chief_state::clock::now()};
  spdlog::warn("chief: lost ps:{} ({}) at step {}; training pauses until it is back (at most {} "
               "ms, cluster.recovery-timeout), then every shard is restored from the latest "
               "checkpoint",
               shard, self->system().render(reason), st.recovering->lost_at, timeout.count());
  st.now = chief_state::phase::initializing; // nothing is granted until the restore
  st.save.drop();
  st.steps->pause(self);
  auto reconnect = st.links.reconnect.shard;
  auto chief = caf::actor_cast<caf::actor>(self);
  self->spawn<caf::detached>([=](caf::event_based_actor* helper) {
    auto back = reconnect(static_cast<int32_t>(shard), timeout);
    if (back)
      helper->send(chief, shard_back_atom::value, static_cast<int32_t>(shard), *back);
    else if (back.error().category() == caf::atom("troupe")
             && back.error().code() == static_cast<uint8_t>(errc::training_stopped))
      // SIGTERM ended the wait: a preemption, as the chief's own relay
      // says too (whichever comes first), not a shard that failed to return.
      helper->send(chief, stop_atom::value);
    else
      helper->send(chief, shard_back_atom::value, static_cast<int32_t>(shard),
                   describe(back.error()));
  });
}

void on_shard_back(self_ptr self, int32_t shard, ps_shard_actor handle) {
  auto& st = self->state;
  if (!st.recovering || st.recovering->shard != shard)
    return;
  st.links.shards[static_cast<size_t>(shard)] = handle;
  self->monitor(handle);
  restore_choice choice;
  try {
    choice = choose_checkpoint(st.config.train.checkpoint.log_dir, restore_request{});
  } catch (const std::exception& e) {
    abort_run(self, std::string("ps:") + std::to_string(shard) + " is back, but " + e.what());
    return;
  }
  for (auto& w : choice.warnings)
    spdlog::warn("chief: {}", w);
  st.links.restore_from = choice.reader;
  auto from = choice.reader ? choice.reader->manifest().step : 0;
  auto lost_at = st.recovering->lost_at;
  spdlog::warn("chief: ps:{} lost at step {}; every shard restored from step {}{}; {} steps to "
               "redo",
               shard, lost_at, from,
               choice.reader ? " (" + choice.reader->dir() + ")" : " (the seed)", lost_at - from);
  st.recovering.reset();
  auto old_run = st.run;
  st.run = draw_run_id();
  st.signing_key = grant_key::draw();
  st.first_step = from;
  st.save.restored_at(from);
  st.data_positions.clear();
  if (choice.reader)
    for (auto& p : choice.reader->manifest().data)
      st.data_positions[p.worker] = p;
  st.steps->restart_at(self, from);
  st.schedule->began(from, chief_state::clock::now());
  st.replan_workers = true;
  spdlog::info("chief: run {} continues as run {}", old_run, st.run);
  st.metrics.shards_recovered();
  try {
    initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, std::string("restoring the shards failed: ") + e.what());
  }
}

void on_shard_not_back(self_ptr self, int32_t shard, const std::string& why) {
  auto& st = self->state;
  if (!st.recovering || st.recovering->shard != shard)
    return;
  abort_run(self,
            "ps:" + std::to_string(shard) + " did not come back within "
              + std::to_string(st.config.runtime.recovery_timeout.count())
              + " ms (cluster.recovery-timeout): " + why
              + "; restart it, or restart the job to continue from the latest checkpoint",
            run_end::lost_peer);
}

} // namespace troupe::chief_run
