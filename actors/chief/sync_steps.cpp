// Sync mode's coordination (SyncReplicasOptimizer): a token queue, spawned
// with the shards' init, runs the updates and reports each one; the chief
// counts them and applies train.on-worker-loss (replica_policy) when workers
// are lost and come back.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/replica_policy.hpp"
#include "actors/token_queue/token_queue.hpp"

namespace troupe::chief_run {

namespace {

class sync_steps final : public step_coordination {
public:
  explicit sync_steps(self_ptr self)
    : replicas_(self->state.config.train.on_worker_loss, self->state.config.replicas,
                self->state.config.num_workers,
                self->state.config.train.replicas_follow_membership),
      step_(self->state.first_step) {}

  int64_t global_step() const override { return step_; }
  int32_t lease() const override { return 1; }
  int64_t refused() const override { return 0; }
  uint64_t dropped() const override { return dropped_; }
  uint64_t expired_leases() const override { return 0; }
  void expire_leases(self_ptr) override {} // a token is a reply: a backup, or R, covers it

  step_coordinator_actor begin(self_ptr self, shard_options& options) override {
    auto& st = self->state;
    auto& t = st.config.train;
    token_queue_config queue{st.run, t.last_step, {}, st.first_step, st.signing_key, st.receipts};
    // Every shard a step pushes to applies every step.
    for (auto shard : st.receipts.shards())
      queue.shards.push_back(st.links.shards[static_cast<size_t>(shard)].address());
    queue_ = self->spawn<caf::linked>(token_queue, queue, caf::actor_cast<chief_actor>(self));
    for (auto& [index, addr] : st.roster->live()) // after a recovery
      self->send(queue_, admit_atom::value, index, caf::actor_cast<worker_actor>(addr));
    options = shard_options{};
    options.sync = true;
    options.replicas_to_aggregate = replicas_.replicas(); // after a recovery: the R in force
    options.last_step = t.last_step;
    options.token_queue = queue_;
    spdlog::info("chief: sync mode: averaging {} of {} workers' gradients per step{}",
                 replicas_.replicas(), st.config.num_workers,
                 replicas_.follows_membership() ? " (all: R follows the membership)" : "");
    return queue_;
  }
  void shards_ready(self_ptr self) override { start_clock(self); } // sync steps start now

  caf::result<step_grant> on_report(self_ptr, const step_report&) override {
    return make_error(
      {errc::invalid_request, "sync mode: workers report to the token queue, not the chief"});
  }

  caf::result<std::vector<step_grant>> on_reports(self_ptr,
                                                  const std::vector<step_report>&) override {
    return make_error({errc::invalid_request,
                       "sync mode: workers report each step to the token queue, not the chief"});
  }

  caf::result<step_grant> on_nonfinite(self_ptr self, step_report r) override {
    if (auto err = unless_admitted(self, r, "a non-finite gradient"))
      return err;
    abort_run(self,
              "worker:" + std::to_string(r.worker) + " computed a non-finite gradient at step "
                + std::to_string(r.step)
                + "; a sync step cannot complete without it: training diverged; lower "
                  "train.learning-rate",
              run_end::diverged);
    return step_grant{0, true};
  }

  void on_step_done(self_ptr self, const step_summary& s) override {
    auto& st = self->state;
    auto sender = self->current_sender();
    if (!queue_ || !sender || sender->address() != queue_.address()) {
      refuse("chief", "a step_done", sender, "only its token queue reports updates");
      return;
    }
    if (st.now != chief_state::phase::training)
      return;
    step_ = s.step;
    st.examples += s.examples;
    auto n = s.position_workers.size();
    if (s.position_epochs.size() == n && s.position_offsets.size() == n
        && s.position_share_ranks.size() == n && s.position_share_counts.size() == n)
      for (size_t i = 0; i < n; ++i)
        st.data_positions[s.position_workers[i]] = {
          s.position_workers[i], s.position_epochs[i], s.position_offsets[i],
          s.position_share_ranks[i], s.position_share_counts[i]};
    dropped_ += s.dropped;
    st.progress.add_step(s.loss, s.correct, s.examples);
    st.progress.add_sync(s.straggler_ms, s.dropped, s.tokens);
    update_counted(self);
    if (s.step >= st.config.train.last_step)
      finish(self);
  }

  void admitted(self_ptr self, int32_t index, const worker_actor& worker) override {
    if (queue_)
      self->send(queue_, admit_atom::value, index, worker);
    if (replicas_.was_lost(index))
      spdlog::info("chief: worker:{} rejoined at step {}", index, step_);
    carry_out(self, replicas_.joined(index));
  }
  void worker_down(self_ptr self, int32_t index, bool lost) override {
    if (lost)
      carry_out(self, replicas_.lost(index));
  }
  std::optional<std::string> short_of_workers(std::chrono::milliseconds limit,
                                              clock::time_point now) const override {
    if (!replicas_.short_for_longer_than(limit, now))
      return std::nullopt;
    return "fewer than " + std::to_string(replicas_.configured()) + " workers for "
           + std::to_string(limit.count())
           + " ms (on-worker-loss = wait, cluster.worker-wait-timeout); restart the lost "
             "workers, or use on-worker-loss = \"shrink\"";
  }

  bool saves_need_fence() const override { return false; }
  void hold() override {}
  bool quiescent() const override { return false; }
  void resume() override {}

  void pause(self_ptr self) override {
    if (!queue_)
      return;
    self->unlink_from(queue_);
    self->send_exit(queue_, caf::exit_reason::user_shutdown);
    queue_ = nullptr;
  }
  void restart_at(self_ptr, int64_t step) override { step_ = step; }

  void finishing() override {}
  void stop(self_ptr self, bool failed) override {
    if (queue_ && !failed)
      self->send(queue_, stop_atom::value); // releases workers waiting for a token
  }
  // The token queue is linked, but a normal exit does not take linked
  // actors down: end it explicitly whenever the chief quits.
  void quit(self_ptr self) override {
    if (queue_)
      self->send_exit(queue_, caf::exit_reason::user_shutdown);
  }

  std::string progress_text(const progress_line& line) const override {
    return fmt::format(" straggler_ms={:.2f} dropped={} tokens={} replicas={}", line.straggler_ms,
                       line.dropped, line.tokens, replicas_.replicas());
  }
  void progress_scalars(const progress_line& line,
                        std::vector<std::pair<std::string, float>>& out) const override {
    out.emplace_back("sync/dropped_gradients", static_cast<float>(line.dropped));
    out.emplace_back("sync/straggler_ms", static_cast<float>(line.straggler_ms));
  }

private:
  // Logs and carries out what a lost or returning worker changed.
  void carry_out(self_ptr self, const replica_policy::change& c) {
    auto& st = self->state;
    if (c.became_short)
      spdlog::warn("chief: {} of {} needed workers available; holding step {} until a lost "
                   "worker restarts (on-worker-loss = wait, at most {} ms)",
                   replicas_.available(), replicas_.configured(), step_,
                   st.config.runtime.worker_wait_timeout.count());
    if (c.enough_again)
      spdlog::info("chief: enough workers again; step {} goes on", step_);
    if (!c.replicas)
      return;
    if (replicas_.follows_membership())
      spdlog::info("chief: averaging {} gradient(s) per step from now on (was {}; "
                   "replicas-to-aggregate = all follows the {} worker(s) taking part)",
                   *c.replicas, c.previous, replicas_.available());
    else
      spdlog::warn("chief: averaging {} gradient(s) per step from now on (was {}; {} worker(s) "
                   "gone, on-worker-loss = shrink)",
                   *c.replicas, c.previous, replicas_.lost_count());
    for (auto& shard : st.links.shards)
      self->send(shard, replicas_atom::value, *c.replicas);
  }

  replica_policy replicas_;
  token_queue_actor queue_;
  int64_t step_;
  uint64_t dropped_ = 0;
};

} // namespace

std::shared_ptr<step_coordination> make_sync_steps(self_ptr self) {
  return std::make_shared<sync_steps>(self);
}

} // namespace troupe::chief_run
