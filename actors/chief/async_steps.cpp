// Async mode's coordination: the chief grants each global step itself
// (grant_desk: leases, revocations, waiting workers, the fence of a
// checkpoint) and counts every worker's report. SSP is async whose grants
// wait for the slowest worker (staleness_bound).
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/grant_desk.hpp"

namespace troupe::chief_run {

namespace {

using desk = grant_desk<caf::typed_response_promise<step_grant>>;

class async_steps final : public step_coordination {
public:
  explicit async_steps(self_ptr self)
    : pull_ahead_(self->state.config.train.pull_ahead),
      desk_(make_desk(self, self->state.first_step)) {}

  int64_t global_step() const override { return desk_.global_step(); }
  int32_t lease() const override { return async_step_lease(pull_ahead_); }
  int64_t refused() const override { return desk_.refused(); }
  uint64_t dropped() const override { return 0; }

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
    auto answer = desk_.report(r);
    if (answer.completed) {
      st.examples += r.examples;
      st.data_positions[r.worker] = {r.worker, r.data_epoch, r.data_offset, r.share_rank,
                                     r.share_count};
      st.progress.add_step(r.loss, r.correct, r.examples);
      update_counted(self);
    }
    on_grant_settled(self);
    return carry_out(self, r.worker, answer);
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
    return desk(t.last_step, st.config.runtime.max_refused_steps, first_step,
                async_step_lease(t.pull_ahead), grant_signer{st.signing_key, st.run},
                t.mode == update_mode::ssp ? staleness_bound(t.staleness)
                                           : staleness_bound::unbounded());
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
        auto rp = self->make_response_promise<step_grant>();
        desk_.park(worker, rp);
        return rp;
      }
      case desk::outcome::finished:
        finish(self);
        break;
      case desk::outcome::diverged:
        abort_run(self, std::to_string(desk_.refused())
                          + " updates not applied (non-finite gradients or refused pushes): "
                            "training diverged; lower train.learning-rate");
        break;
    }
    return step_grant{0, true};
  }

  bool pull_ahead_;
  desk desk_;
};

} // namespace

std::shared_ptr<step_coordination> make_async_steps(self_ptr self) {
  return std::make_shared<async_steps>(self);
}

} // namespace troupe::chief_run
