// The chief's checkpoints (TF's Supervisor saving and restoring): when to
// save, the fence that makes every shard copy its state at the same update,
// handing the copies to a detached writer, and restoring the optimizer's
// slots after the shards' init.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_writer.hpp"
#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "tensor/checkpoint/restore.hpp"
#include "tensor/plan/partitioner.hpp"

namespace troupe::chief_run {

namespace {

double ms_since(chief_state::clock::time_point t) {
  return std::chrono::duration<double, std::milli>(chief_state::clock::now() - t).count();
}

// Async saves hold new grants while the shards copy; nothing else pauses.
void end_fence(self_ptr self) {
  auto& st = self->state;
  bool stopping = st.saving && st.saving->final; // a preemption's: no more steps
  if (st.grants && st.grants->held() && st.now == chief_state::phase::training && !stopping)
    st.grants->resume();
}

void abandon(self_ptr self, const std::string& why) {
  auto& st = self->state;
  spdlog::warn("chief: checkpoint at step {} abandoned: {}; training goes on", st.saving->version,
               why);
  bool final = st.saving->final;
  st.saving.reset();
  end_fence(self);
  if (final) {
    st.final_checkpoint_error = why;
    if (auto then = std::move(st.after_final_save))
      then();
  }
}

void write(self_ptr self) {
  auto& st = self->state;
  auto& save = *st.saving;
  checkpoint_job job;
  job.run = st.run;
  job.log_dir = st.config.train.checkpoint.log_dir;
  job.keep = st.config.train.checkpoint.keep;
  job.manifest.step = save.version;
  job.manifest.fingerprint = checkpoint_fingerprint(st.config.train.model,
                                                    st.config.train.optimizer.kind);
  for (auto& v : st.links.net->variables())
    job.manifest.variables.emplace_back(v.name, v.shape);
  for (auto& copy : save.copies)
    job.manifest.shard_updates.push_back(copy.version);
  for (auto& [worker, position] : st.data_positions)
    job.manifest.data.push_back(position);
  job.shards = st.links.shards;
  job.copies = save.copies;
  job.plan = st.router->plan();
  job.variables = st.links.net->variables();
  job.request_timeout = st.config.runtime.request_timeout;
  auto chief = caf::actor_cast<caf::actor>(self);
  if (st.config.detached_evaluation)
    self->spawn<caf::detached>(checkpoint_writer, std::move(job), std::move(chief));
  else
    self->spawn(checkpoint_writer, std::move(job), std::move(chief));
}

// Every shard holding variables copies its state once it has applied
// `version` updates (async: at once, the fence made sure; sync: after that
// update). Shards holding nothing have nothing to copy.
void request_copies(self_ptr self, int64_t version) {
  auto& st = self->state;
  auto& save = *st.saving;
  save.requested = true;
  save.version = version;
  save.copies.assign(st.links.shards.size(), snapshot_index{});
  auto parts = st.router->parts().size();
  auto timeout = st.config.runtime.request_timeout + st.config.runtime.worker_wait_timeout;
  for (auto& part : st.router->parts())
    self
      ->request(st.links.shards[static_cast<size_t>(part.shard)], timeout, snapshot_atom::value,
                st.run, version)
      .then(
        [self, id = save.id, shard = part.shard, parts](snapshot_index& copy) {
          auto& st = self->state;
          if (!st.saving || st.saving->id != id)
            return;
          st.saving->copies[static_cast<size_t>(shard)] = std::move(copy);
          if (++st.saving->answered < parts)
            return;
          auto paused = ms_since(st.saving->began);
          end_fence(self);
          spdlog::info("chief: checkpoint at step {}: every shard copied its state{} {:.1f} ms "
                       "after the save began",
                       st.saving->version, is_sync(self) ? "" : " (training paused)", paused);
          write(self);
        },
        [self, id = save.id, shard = part.shard](caf::error& err) {
          auto& st = self->state;
          if (st.saving && st.saving->id == id)
            abandon(self, "ps:" + std::to_string(shard) + ": " + describe(err));
        });
}

void begin(self_ptr self, bool final) {
  auto& st = self->state;
  auto step = global_step(self);
  st.saving = chief_state::save_attempt{++st.save_attempts,        final, false, step,
                                        chief_state::clock::now(), {},    0};
  st.schedule->began(step, st.saving->began);
  if (final && st.now != chief_state::phase::training) {
    request_copies(self, step); // every step is in: the shards are still
  } else if (is_sync(self)) {
    // The update after next: the shards cannot have passed it yet.
    if (step + 2 > st.config.train.last_step) {
      st.saving.reset(); // the final save is near
      if (final && st.after_final_save)
        std::exchange(st.after_final_save, nullptr)();
      return;
    }
    request_copies(self, step + 2);
  } else {
    st.grants->hold();
    on_grant_settled(self);
  }
}

} // namespace

void maybe_save(self_ptr self) {
  auto& st = self->state;
  if (!st.schedule || st.saving || st.now != chief_state::phase::training)
    return;
  if (st.schedule->due(global_step(self), chief_state::clock::now()))
    begin(self, false);
}

void on_grant_settled(self_ptr self) {
  auto& st = self->state;
  if (st.saving && !st.saving->requested && st.grants && st.grants->quiescent())
    request_copies(self, st.grants->global_step());
}

void on_saved(self_ptr self, int64_t step, bool ok, const std::string& what, uint64_t bytes,
              double seconds) {
  auto& st = self->state;
  if (!st.saving || st.saving->version != step)
    return;
  bool final = st.saving->final;
  st.saving.reset();
  if (ok)
    st.last_saved_step = step;
  if (ok) {
    spdlog::info("chief: saved checkpoint {} (step {}, {} bytes, written in {:.0f} ms)", what, step,
                 bytes, seconds * 1000);
    summarize_checkpoint(self, step, seconds, bytes);
  } else
    spdlog::error("chief: checkpoint at step {} failed: {}{}", step, what,
                  final ? "" : "; training goes on, the previous checkpoint stays the latest");
  if (final) {
    if (!ok)
      st.final_checkpoint_error = what;
    if (auto then = std::move(st.after_final_save))
      then();
    return;
  }
  if (st.final_save_wanted) {
    st.final_save_wanted = false;
    begin(self, true);
  }
}

void on_preempted(self_ptr self) {
  auto& st = self->state;
  if (st.now == chief_state::phase::done)
    return; // stopping already (a second SIGTERM, or the relay after a stopped reconnect)
  if (st.recovering) {
    // Waiting for a lost shard: the latest checkpoint is where a restart
    // continues, as after any preemption.
    auto& lost = *st.recovering;
    auto why = "stopped by SIGTERM while waiting for lost ps:" + std::to_string(lost.shard)
               + " (lost at step " + std::to_string(lost.lost_at) + ")";
    spdlog::warn("chief: SIGTERM while waiting for ps:{}; stopping the cluster", lost.shard);
    st.recovering.reset();
    stop_preempted(self, why);
    return;
  }
  if (st.now != chief_state::phase::training) {
    spdlog::warn("chief: SIGTERM while {}; stopping the cluster",
                 st.now == chief_state::phase::initializing ? "initialising" : "finishing");
    if (st.now == chief_state::phase::initializing)
      abort_run(self, "stopped by SIGTERM before training began");
    return;
  }
  spdlog::warn("chief: SIGTERM at step {}: saving a checkpoint, then stopping the cluster",
               global_step(self));
  if (!st.schedule) {
    stop_preempted(self);
    return;
  }
  if (st.saving && !st.saving->final && !st.saving->requested)
    st.saving.reset(); // a fence begun for a periodic save: the final one takes over
  st.after_final_save = [self] { stop_preempted(self); };
  if (st.saving)
    st.final_save_wanted = true;
  else
    begin(self, true);
}

void save_final_then(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.schedule) {
    then();
    return;
  }
  if (!st.saving && st.last_saved_step == global_step(self)) {
    then(); // the last periodic save holds the final state already
    return;
  }
  st.after_final_save = std::move(then);
  if (st.saving) {
    if (st.saving->final)
      return; // running; it calls `then`
    if (st.saving->requested && st.saving->version == global_step(self)) {
      st.saving->final = true; // this one already holds the final state
      return;
    }
    if (!st.saving->requested)
      st.saving.reset(); // a fence that the end overtook
    else {
      st.final_save_wanted = true;
      return;
    }
  }
  begin(self, true);
}

void restore_slots(self_ptr self, std::function<void()> done) {
  auto& st = self->state;
  auto& ckpt = *st.links.restore_from;
  auto& vars = st.links.net->variables();
  std::vector<std::pair<size_t, std::pair<std::string, tensor>>> sends; // shard, (key, value)
  for (size_t v = 0; v < vars.size(); ++v)
    for (auto& slot : ckpt.slots_of(vars[v].name)) {
      auto full = ckpt.assemble(vars[v].name, slot);
      for (auto& part : st.router->parts())
        for (auto i : part.slices)
          if (st.router->variable_of(i) == v)
            sends.push_back(
              {static_cast<size_t>(part.shard),
               {st.router->plan()[i].name + "/" + slot, extract_slice(st.router->slice(i), full)}});
    }
  if (sends.empty()) {
    done();
    return;
  }
  auto join = make_fan_in(sends.size(), std::move(done));
  for (auto& [shard, slot] : sends)
    self
      ->request(st.links.shards[shard], st.config.runtime.request_timeout, restore_atom::value,
                st.run, slot.first, std::move(slot.second))
      .then([join](caf::ok_atom) { join->arrive(); },
            [self, shard = shard, key = slot.first](caf::error& err) {
              abort_run(self, "restoring " + key + " into ps:" + std::to_string(shard)
                                + " failed: " + describe(err));
            });
}

} // namespace troupe::chief_run
