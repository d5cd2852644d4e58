// Async mode's coordination: the chief grants each global step itself
// (grant_desk: leases, revocations, waiting workers, the fence of a
// checkpoint) and counts every worker's report. SSP is async whose grants
// wait for the slowest worker (staleness_bound).
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/grant_desk.hpp"

namespace troupe::chief_run {

namespace {

// A parked worker's answer, one grant: to its report, or to its batch of
// reports (train.report-every), over BASP or on its report connection.
struct parked_reply {
  caf::typed_response_promise<step_grant> one;
  caf::typed_response_promise<std::vector<step_grant>> batch;
  std::function<void(const std::vector<step_grant>&)> relay;
  void deliver(const step_grant& grant) {
    if (relay)
      relay({grant});
    else if (batch.pending())
      batch.deliver(std::vector<step_grant>{grant});
    else
      one.deliver(grant);
  }
};

// The reply to park for the message being handled: on its report
// connection when it was relayed, else a promise of the kind asked for.
parked_reply park_reply(self_ptr self, bool batch) {
  parked_reply reply;
  reply.relay = relayed_reply(self);
  if (reply.relay)
    return reply; // the promises stay empty: the handler's result says "delegated"
  if (batch)
    reply.batch = self->make_response_promise<std::vector<step_grant>>();
  else
    reply.one = self->make_response_promise<step_grant>();
  return reply;
}

using desk = grant_desk<parked_reply>;

class async_steps final : public step_coordination {
public:
  explicit async_steps(self_ptr self)
    : pull_ahead_(self->state.config.train.pull_ahead),
      report_every_(self->state.config.train.report_every),
      desk_(make_desk(self, self->state.first_step)) {}

  int64_t global_step() const override { return desk_.global_step(); }
  int32_t lease() const override { return async_step_lease(pull_ahead_, report_every_); }
  int64_t refused() const override { return desk_.refused(); }
  uint64_t dropped() const override { return 0; }
  uint64_t expired_leases() const override { return expired_leases_; }

  // A slow worker's steps go to the others; the shards refuse its pushes
  // of them from now on, so that a late push neither lands beside the new
  // holder's nor moves a shard past a checkpoint's fence.
  void expire_leases(self_ptr self) override {
    auto& st = self->state;
    auto expired = desk_.expire(st.config.runtime.step_lease_timeout);
    for (auto& lease : expired) {
      ++expired_leases_;
      std::string steps;
      for (auto step : lease.steps)
        steps += (steps.empty() ? "" : ", ") + std::to_string(step);
      spdlog::warn("chief: worker:{} is slow: it held step(s) {} and reported nothing for {} ms "
                   "(cluster.step-lease-timeout = {} ms); they go to the other workers",
                   lease.worker, steps,
                   std::chrono::duration_cast<std::chrono::milliseconds>(lease.silent).count(),
                   st.config.runtime.step_lease_timeout.count());
      for (auto step : lease.steps)
        for (auto shard : st.receipts.shards())
          self->send(st.links.shards[static_cast<size_t>(shard)], revoke_atom::value, st.run,
                     lease.worker, step);
    }
    if (!expired.empty())
      on_grant_settled(self);
  }

  step_coordinator_actor begin(self_ptr self, shard_options&) override {
    return caf::actor_cast<step_coordinator_actor>(self);
  }
  void shards_ready(self_ptr) override {} // the clock starts at the first grant

  caf::result<step_grant> on_report(self_ptr self, const step_report& r) override {
    auto& st = self->state;
    if (auto err = unless_admitted(self, r, "a report"))
      return err;
    if (st.now == chief_state::phase::finishing || st.now == chief_state::phase::done)
      return step_grant{0, true};
    if (auto err = unless_proven(self, r))
      return err;
    auto answer = desk_.report(r);
    if (answer.completed)
      count(self, r);
    on_grant_settled(self);
    return carry_out(self, r.worker, answer);
  }

  // One message for several steps of one worker: each report is settled as
  // a single one would be, then the worker's lease is filled up again.
  caf::result<std::vector<step_grant>> on_reports(self_ptr self,
                                                  const std::vector<step_report>& rs) override {
    auto& st = self->state;
    if (rs.empty() || rs.size() > static_cast<size_t>(lease()))
      return refuse("chief", "a batch of " + std::to_string(rs.size()) + " reports",
                    self->current_sender(),
                    "a batch holds 1.." + std::to_string(lease()) + " reports (the lease)");
    for (auto& r : rs)
      if (r.worker != rs.front().worker || r.run != rs.front().run)
        return refuse("chief", "a batch of reports", self->current_sender(),
                      "it mixes workers or runs");
    if (auto err = unless_admitted(self, rs.front(), "a batch of reports"))
      return err;
    const std::vector<step_grant> stop{step_grant{0, true}};
    if (st.now == chief_state::phase::finishing || st.now == chief_state::phase::done)
      return stop;
    for (auto& r : rs)
      if (auto err = unless_proven(self, r))
        return err;
    for (auto& r : rs) {
      auto done = desk_.settle(r);
      if (done == desk::settled::completed)
        count(self, r);
      else if (done == desk::settled::diverged) {
        diverge(self);
        return stop;
      }
    }
    on_grant_settled(self);
    const int32_t worker = rs.front().worker;
    auto refill = desk_.fill(worker);
    switch (refill.what) {
      case desk::outcome::granted: {
        std::vector<step_grant> grants;
        grants.reserve(refill.steps.size());
        for (auto step : refill.steps)
          grants.push_back(desk_.grant_of(worker, step));
        if (!grants.empty())
          start_clock(self);
        return grants;
      }
      case desk::outcome::waiting: {
        auto reply = park_reply(self, true);
        desk_.park(worker, reply);
        return reply.batch;
      }
      case desk::outcome::finished:
        finish(self);
        break;
      case desk::outcome::diverged:
        break;
    }
    return stop;
  }

  // A step given back unstarted: it goes to whichever worker asks next,
  // this one too (the shards are not told: nothing of it was pushed).
  void on_idle(self_ptr self, const step_report& r) override {
    if (unless_admitted(self, r, "a step given back"))
      return;
    if (desk_.give_back(r.worker, r.step))
      on_grant_settled(self);
  }

  // A non-finite gradient revokes the step: another worker computes it again.
  caf::result<step_grant> on_nonfinite(self_ptr self, step_report r) override {
    if (auto err = unless_admitted(self, r, "a non-finite gradient"))
      return err;
    r.applied = false;
    return on_report(self, r);
  }

  void on_step_done(self_ptr self, const step_summary&) override {
    refuse("chief", "a step_done", self->current_sender(),
           "async mode has no token queue; the chief grants every step");
  }

  void admitted(self_ptr, int32_t index, const worker_actor&) override { desk_.enroll(index); }
  void worker_down(self_ptr self, int32_t index, bool) override {
    desk_.lose(index); // its steps go to the others
    on_grant_settled(self);
  }
  std::optional<std::string> short_of_workers(std::chrono::milliseconds,
                                              clock::time_point) const override {
    return std::nullopt; // any number of workers goes on
  }

  bool saves_need_fence() const override { return true; }
  void hold() override { desk_.hold(); }
  bool quiescent() const override { return desk_.quiescent(); }
  void resume() override {
    if (desk_.held())
      desk_.resume();
  }

  void pause(self_ptr) override {
    desk_.hold();
    desk_.drop_waiting(); // they wait for the new plan
  }
  void restart_at(self_ptr self, int64_t step) override { desk_ = make_desk(self, step); }

  void finishing() override { desk_.release_all(); }
  void stop(self_ptr, bool failed) override {
    if (failed)
      desk_.drop_waiting(); // the stop ends them
    else
      desk_.release_all();
  }
  void quit(self_ptr) override {}

  std::string progress_text(const progress_line&) const override { return {}; }
  void progress_scalars(const progress_line&,
                        std::vector<std::pair<std::string, float>>& out) const override {
    out.emplace_back("async/refused_steps", static_cast<float>(desk_.refused()));
  }

private:
  static desk make_desk(self_ptr self, int64_t first_step) {
    auto& st = self->state;
    auto& t = st.config.train;
    return desk(
      t.last_step, st.config.runtime.max_refused_steps, first_step,
      async_step_lease(t.pull_ahead, t.report_every), grant_signer{st.signing_key, st.run},
      t.mode == update_mode::ssp ? staleness_bound(t.staleness) : staleness_bound::unbounded());
  }

  // A completed step: its examples, the worker's data position, progress.
  static void count(self_ptr self, const step_report& r) {
    auto& st = self->state;
    st.examples += r.examples;
    st.data_positions[r.worker] = {r.worker, r.data_epoch, r.data_offset, r.share_rank,
                                   r.share_count};
    st.progress.add_step(r.loss, r.correct, r.examples);
    update_counted(self);
  }

  // What the desk decided, as the worker's answer.
  caf::result<step_grant> carry_out(self_ptr self, int32_t worker, const desk::answer& a) {
    switch (a.what) {
      case desk::outcome::granted:
        start_clock(self);
        return desk_.grant_of(worker, a.step);
      case desk::outcome::waiting: {
        // Every remaining step is held by another worker; one may yet be
        // revoked, so this worker waits instead of leaving.
        auto reply = park_reply(self, false);
        desk_.park(worker, reply);
        return reply.one;
      }
      case desk::outcome::finished:
        finish(self);
        break;
      case desk::outcome::diverged:
        diverge(self);
        break;
    }
    return step_grant{0, true};
  }

  void diverge(self_ptr self) {
    abort_run(self,
              std::to_string(desk_.refused())
                + " updates not applied (non-finite gradients or refused pushes): "
                  "training diverged; lower train.learning-rate",
              run_end::diverged);
  }

  bool pull_ahead_;
  int32_t report_every_;
  desk desk_;
  uint64_t expired_leases_ = 0;
};

} // namespace

std::shared_ptr<step_coordination> make_async_steps(self_ptr self) {
  return std::make_shared<async_steps>(self);
}

} // namespace troupe::chief_run
