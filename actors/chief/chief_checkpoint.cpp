// The chief's checkpoints (TF's Supervisor saving and restoring): when to
// save, the fence that makes every shard copy its state at the same update,
// handing the copies to a detached writer, and restoring the optimizer's
// slots after the shards' init.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_save.hpp"
#include "actors/chief/checkpoint_writer.hpp"
#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "tensor/checkpoint/restore.hpp"
#include "tensor/checkpoint/table_file.hpp"
#include "tensor/plan/partitioner.hpp"

namespace troupe::chief_run {

namespace {

double ms_since(chief_state::clock::time_point t) {
  return std::chrono::duration<double, std::milli>(chief_state::clock::now() - t).count();
}

checkpoint_save::context context_of(self_ptr self) {
  auto& st = self->state;
  return {global_step(self), st.now == chief_state::phase::training, !st.steps->saves_need_fence(),
          st.config.train.last_step};
}

void carry_out(self_ptr self, const checkpoint_save::actions& act);

void write(self_ptr self, int64_t version) {
  auto& st = self->state;
  checkpoint_job job;
  job.run = st.run;
  job.log_dir = st.config.train.checkpoint.log_dir;
  job.keep = st.config.train.checkpoint.keep;
  job.manifest.step = version;
  job.manifest.fingerprint = checkpoint_fingerprint(st.config.train.model,
                                                    st.config.train.optimizer.kind);
  for (auto& v : st.links.net->variables())
    job.manifest.variables.emplace_back(v.name, v.shape);
  for (auto& copy : st.save_copies)
    job.manifest.shard_updates.push_back(copy.version);
  for (auto& [worker, position] : st.data_positions)
    job.manifest.data.push_back(position);
  job.shards = st.links.shards;
  job.bulk = st.links.bulk;
  job.copies = st.save_copies;
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
  st.save_copies.assign(st.links.shards.size(), snapshot_index{});
  auto parts = st.router->parts().size();
  auto timeout = st.config.runtime.request_timeout + st.config.runtime.worker_wait_timeout;
  for (auto& part : st.router->parts())
    self
      ->request(st.links.shards[static_cast<size_t>(part.shard)], timeout, snapshot_atom::value,
                st.run, version)
      .then(
        [self, id = st.save.id(), shard = part.shard, parts](snapshot_index& copy) {
          auto& st = self->state;
          if (st.save.id() != id)
            return;
          st.save_copies[static_cast<size_t>(shard)] = std::move(copy);
          carry_out(self, st.save.copy_arrived(id, parts));
        },
        [self, id = st.save.id(), shard = part.shard](caf::error& err) {
          auto& st = self->state;
          carry_out(self,
                    st.save.copy_failed(id, "ps:" + std::to_string(shard) + ": " + describe(err)));
        });
}

// Carries out what the save decided, in its order.
void carry_out(self_ptr self, const checkpoint_save::actions& act) {
  auto& st = self->state;
  if (act.began) {
    st.save_began = chief_state::clock::now();
    st.schedule->began(*act.began, st.save_began);
  }
  if (!act.abandoned.empty())
    spdlog::warn("chief: {}; training goes on", act.abandoned);
  if (act.hold_grants) {
    st.steps->hold();
    on_grant_settled(self);
  }
  if (act.request_copies)
    request_copies(self, *act.request_copies);
  // Async saves hold new grants while the shards copy; nothing else pauses.
  if (act.resume_grants && st.now == chief_state::phase::training)
    st.steps->resume();
  if (act.write) {
    spdlog::info("chief: checkpoint at step {}: every shard copied its state{} {:.1f} ms after "
                 "the save began",
                 *act.write, st.steps->saves_need_fence() ? " (training paused)" : "",
                 ms_since(st.save_began));
    write(self, *act.write);
  }
  if (act.final_over)
    if (auto then = std::exchange(st.after_final_save, nullptr))
      then();
}

} // namespace

void maybe_save(self_ptr self) {
  auto& st = self->state;
  if (!st.schedule || st.save.saving() || st.now != chief_state::phase::training)
    return;
  if (st.schedule->due(global_step(self), chief_state::clock::now()))
    carry_out(self, st.save.begin_periodic(context_of(self)));
}

void on_grant_settled(self_ptr self) {
  auto& st = self->state;
  if (st.save.saving() && st.steps->quiescent())
    carry_out(self, st.save.fence_reached(global_step(self)));
}

void on_saved(self_ptr self, int64_t step, bool ok, const std::string& what, uint64_t bytes,
              double seconds) {
  auto& st = self->state;
  if (!st.save.saving() || st.save.version() != step)
    return;
  if (ok) {
    spdlog::info("chief: saved checkpoint {} (step {}, {} bytes, written in {:.0f} ms)", what, step,
                 bytes, seconds * 1000);
    summarize_checkpoint(self, step, seconds, bytes);
    st.metrics.checkpoint_written(step);
  } else {
    spdlog::error("chief: checkpoint at step {} failed: {}{}", step, what,
                  st.save.final() ? ""
                                  : "; training goes on, the previous checkpoint stays the latest");
  }
  carry_out(self, st.save.written(context_of(self), step, ok, what));
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
      abort_run(self, "stopped by SIGTERM before training began", run_end::preempted);
    return;
  }
  spdlog::warn("chief: SIGTERM at step {}: saving a checkpoint, then stopping the cluster",
               global_step(self));
  save_final_then(self, [self] { stop_preempted(self); });
}

void save_final_then(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.schedule) {
    then();
    return;
  }
  st.after_final_save = std::move(then);
  carry_out(self, st.save.want_final(context_of(self)));
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

namespace {

// The checkpoint's tables on their way to the shards: read a batch at a
// time, with a few requests in flight, so that the chief holds a few
// batches, never a table (which may be larger than the chief's memory).
struct table_restore {
  std::vector<std::unique_ptr<saved_table_reader>> readers; // by table
  size_t table = 0;                                         // the reader being drained
  size_t in_flight = 0;
  bool over = false; // done, or the run aborted
  std::function<void()> done;
};

constexpr size_t restore_requests_in_flight = 4;

void log_restored(self_ptr self, const table_restore& job) {
  auto& rows = job.readers[job.table]->rows_out();
  for (size_t shard = 0; shard < rows.size(); ++shard)
    spdlog::info("chief: restoring {} row(s) of table {} into ps:{}", rows[shard],
                 self->state.tables[job.table].table.name, shard);
}

void send_restored_rows(self_ptr self, const std::shared_ptr<table_restore>& job) {
  if (job->over)
    return;
  auto& st = self->state;
  std::optional<saved_rows> rows;
  try {
    while (job->table < job->readers.size() && !(rows = job->readers[job->table]->next())) {
      log_restored(self, *job);
      ++job->table;
    }
  } catch (const std::exception& e) {
    job->over = true;
    abort_run(self, std::string("restoring the embedding tables failed: ") + e.what());
    return;
  }
  if (!rows) {
    if (job->in_flight == 0) {
      job->over = true;
      job->done();
    }
    return;
  }
  auto shard = rows->shard;
  auto n = static_cast<int64_t>(rows->keys.size());
  auto width = static_cast<int64_t>(rows->payloads.size()) / n;
  restored_rows batch{static_cast<int32_t>(job->table), std::move(rows->keys),
                      std::move(rows->frequencies), std::move(rows->last_updates),
                      tensor({n, width}, std::move(rows->payloads))};
  ++job->in_flight;
  self
    ->request(st.links.shards[shard], st.config.runtime.request_timeout, restore_atom::value,
              st.run, std::move(batch))
    .then(
      [self, job](caf::ok_atom) {
        --job->in_flight;
        send_restored_rows(self, job);
      },
      [self, job, shard](caf::error& err) {
        job->over = true;
        abort_run(self, "restoring embedding rows into ps:" + std::to_string(shard)
                          + " failed: " + describe(err));
      });
}

} // namespace

// The checkpoint's embedding rows, each sent to the shard that owns its
// bucket now (any shard count: whole buckets move), in messages of at most
// 65,536 rows (and at most embedding.max-keys-per-request).
void restore_tables(self_ptr self, std::function<void()> done) {
  auto& st = self->state;
  auto job = std::make_shared<table_restore>();
  job->done = std::move(done);
  auto shards = static_cast<uint32_t>(st.links.shards.size());
  try {
    for (auto& setup : st.tables) {
      std::vector<const safetensors_file*> files;
      for (auto& [name, file] : st.links.restore_from->files())
        if (file.metadata().count("emb/" + setup.table.name))
          files.push_back(&file);
      // No more rows a message than a request may name (the shard's limit).
      auto batch = std::min<size_t>(65536, static_cast<size_t>(setup.max_keys));
      job->readers.push_back(
        std::make_unique<saved_table_reader>(std::move(files), setup.table, shards, batch));
    }
  } catch (const std::exception& e) {
    abort_run(self, std::string("restoring the embedding tables failed: ") + e.what());
    return;
  }
  for (size_t i = 0; i < restore_requests_in_flight; ++i)
    send_restored_rows(self, job);
}

} // namespace troupe::chief_run
