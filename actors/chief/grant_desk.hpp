#pragma once
// Async mode: the chief's answer to each worker's report, without CAF. It
// keeps the step budget (grants, completions, revocations), the workers that
// wait because every remaining step is held by others, and the count of
// updates that were not applied. Reply is what a waiting worker is answered
// through: a CAF response promise in the chief, a recorder in tests; it
// needs deliver(step_grant).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "actors/chief/staleness_bound.hpp"
#include "actors/chief/step_budget.hpp"
#include "actors/protocol/grant_proof.hpp"
#include "actors/protocol/protocol.hpp"

namespace troupe {

/// Async mode: each worker holds two steps, so that the report of one and
/// the grant of the next overlap the other's pull and compute, and the chief
/// is off the workers' critical path (docs/architecture.md, "Step leases").
/// With train.pull-ahead three: one pushing, one computing, and the grant of
/// the next on its way.
/// With train.report-every = k the worker reports k steps at a time and
/// holds k more, so that it computes k steps while the batch is answered
/// (with fewer, a slow answer would make it send a batch of one).
constexpr int32_t async_step_lease(bool pull_ahead, int32_t report_every = 1) {
  return (pull_ahead ? 3 : 2) + (report_every > 1 ? 2 * (report_every - 1) : 0);
}

template <class Reply>
class grant_desk {
public:
  enum class outcome {
    granted,  ///< compute `step` next
    waiting,  ///< park the worker's reply: a revoked step or the end will answer it
    finished, ///< every step is done: stop (the run ends now)
    diverged, ///< more updates than allowed were not applied: abort the run
  };

  struct answer {
    outcome what = outcome::granted;
    int64_t step = 0;
    bool completed = false; ///< the report completed the worker's grant (an update counted)
  };

  using clock = std::chrono::steady_clock;

  /// lease: the steps a worker may hold at once (step_budget); signer: the
  /// run's key, for the proof each grant carries; bound: how far a worker
  /// may run ahead of the slowest (train.mode = "ssp"; unbounded: async);
  /// now: the clock leases run on (a test's own).
  grant_desk(int64_t last_step, int64_t max_refused, int64_t first_step = 0, int32_t lease = 1,
             grant_signer signer = {}, staleness_bound bound = staleness_bound::unbounded(),
             std::function<clock::time_point()> now = clock::now)
    : budget_(last_step, first_step, lease), max_refused_(max_refused), signer_(signer),
      bound_(bound), now_(std::move(now)) {}

  /// A worker joins the run: its clock starts at the slowest one.
  void enroll(int32_t worker) { bound_.enroll(worker); }

  /// The grant of `step` to `worker`, with its proof.
  step_grant grant_of(int32_t worker, int64_t step) const { return signer_.grant(worker, step); }

  /// What a report did to the budget.
  enum class settled {
    nothing,   ///< no step of this worker's: an ask only (or a repeat)
    completed, ///< its update counted
    revoked,   ///< not applied: the step goes to another worker
    diverged,  ///< ... and more updates than allowed were not applied
  };

  /// Completes or revokes the step a report names, granting nothing.
  settled settle(const step_report& r) {
    active(r.worker);
    if (r.step < 0 || !budget_.has_grant(r.worker, r.step))
      return settled::nothing;
    if (r.applied) {
      budget_.complete(r.worker, r.step);
      bound_.completed(r.worker);
      return settled::completed;
    }
    budget_.revoke(r.worker, r.step);
    bound_.revoked(r.worker);
    hand_out_returned();
    return ++refused_ > max_refused_ ? settled::diverged : settled::revoked;
  }

  /// A worker's report (also a non-finite gradient's, with applied = false):
  /// completes or revokes the step it reports, then hands it its next step.
  answer report(const step_report& r) {
    answer out;
    auto done = settle(r);
    if (done == settled::diverged)
      return {outcome::diverged, 0, false};
    out.completed = done == settled::completed;
    if (budget_.finished()) {
      out.what = outcome::finished;
      return out;
    }
    if (held_) {
      out.what = outcome::waiting;
      return out;
    }
    auto step = next_grant(r.worker);
    if (out.completed && bound_.bounded())
      hand_out_returned(); // the slowest clock may have moved: waiting workers go on
    if (step) {
      out.step = *step;
      return out;
    }
    out.what = outcome::waiting;
    return out;
  }

  /// After a batch of reports (each settled): new steps until the worker
  /// holds its whole lease again, but at most its share of the steps not
  /// granted yet (over the workers holding some). Holdings then shrink as
  /// the pool runs dry, so that at the end no worker is left computing a
  /// long lease while the others idle (the reports arrive up to a batch
  /// late, so the steps left to complete would overstate what is left).
  /// `granted` with none while it still holds steps (a fence, or every
  /// step granted); `waiting` where it holds none.
  struct refill {
    outcome what = outcome::granted;
    std::vector<int64_t> steps;
  };
  refill fill(int32_t worker) {
    refill out;
    if (budget_.finished()) {
      out.what = outcome::finished;
      return out;
    }
    const auto holders = static_cast<int64_t>(budget_.holders()
                                              + (budget_.held(worker) == 0 ? 1 : 0));
    const auto fair = std::max<int64_t>(1, (budget_.ungranted() + holders - 1) / holders);
    const auto lease = std::min(static_cast<size_t>(budget_.lease()), static_cast<size_t>(fair));
    while (!held_ && budget_.held(worker) < lease) {
      auto step = next_grant(worker);
      if (!step)
        break;
      out.steps.push_back(*step);
    }
    if (out.steps.empty() && budget_.held(worker) == 0)
      out.what = outcome::waiting;
    return out;
  }

  /// Keeps the reply of a worker told to wait (a worker with a lease of
  /// two may wait twice).
  void park(int32_t worker, Reply reply) { waiting_.emplace(worker, std::move(reply)); }

  /// A worker gives `step` back unstarted (no data for it yet): it goes to
  /// a waiting worker or back to the pool, not counted as refused. False
  /// where the worker holds no such step.
  bool give_back(int32_t worker, int64_t step) {
    active(worker);
    if (step < 0 || !budget_.has_grant(worker, step))
      return false;
    budget_.revoke(worker, step);
    bound_.revoked(worker);
    hand_out_returned();
    return true;
  }

  /// A worker is gone: its steps go to waiting workers or back to the pool.
  void lose(int32_t worker) {
    waiting_.erase(worker);
    active_.erase(worker);
    budget_.revoke_all(worker);
    bound_.leave(worker);
    hand_out_returned();
  }

  /// A worker that held steps and gave no sign of life (a report, or a
  /// grant to it) for longer than `limit`, and the steps taken from it.
  struct expired_lease {
    int32_t worker;
    std::vector<int64_t> steps;
    clock::duration silent;
  };
  /// Takes back the steps of every worker silent for longer than `limit`
  /// (TF's and Bosen's answer to a held step: a lease with a deadline) and
  /// hands them to waiting workers, or back to the pool. The worker stays:
  /// a report of a step taken back counts nothing, and it asks for more.
  std::vector<expired_lease> expire(clock::duration limit) {
    std::vector<expired_lease> out;
    auto now = now_();
    for (auto worker : budget_.holding()) {
      auto seen = active_.find(worker);
      auto silent = seen == active_.end() ? clock::duration::zero() : now - seen->second;
      if (seen == active_.end() || silent <= limit)
        continue;
      out.push_back({worker, budget_.steps_of(worker), silent});
      for (size_t i = 0; i < out.back().steps.size(); ++i)
        bound_.revoked(worker);
      budget_.revoke_all(worker);
      seen->second = now;
    }
    if (!out.empty())
      hand_out_returned();
    return out;
  }

  /// The end of the run: every waiting worker is answered stop.
  void release_all() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& entry : waiting)
      entry.second.deliver(step_grant{0, true});
  }

  /// Forgets the waiting workers without answering (an aborted run ends them).
  void drop_waiting() { waiting_.clear(); }

  /// A checkpoint's fence: no new grants until resume(); the steps granted
  /// finish (or are revoked) meanwhile, and workers asking wait.
  void hold() noexcept { held_ = true; }
  /// Held and no step outstanding: every shard has applied the same updates.
  bool quiescent() const noexcept { return held_ && budget_.outstanding() == 0; }
  /// Ends the fence: the waiting workers get their steps (those the
  /// staleness bound lets go on).
  void resume() {
    held_ = false;
    for (auto next = waiting_.begin(); next != waiting_.end();) {
      const int32_t worker = next->first;
      if (!bound_.may_start(worker)
          && budget_.held(worker) < static_cast<size_t>(budget_.lease())) {
        ++next; // ahead of the slowest: waits for it
        continue;
      }
      auto step = next_grant(worker);
      if (!step)
        return; // every step granted: the rest wait for revocations or the end
      auto reply = std::move(next->second);
      next = waiting_.erase(next);
      reply.deliver(grant_of(worker, *step));
    }
  }
  bool held() const noexcept { return held_; }

  int64_t global_step() const noexcept { return budget_.global_step(); }
  int64_t refused() const noexcept { return refused_; }
  size_t waiting() const noexcept { return waiting_.size(); }
  bool finished() const noexcept { return budget_.finished(); }

private:
  // The worker's next step, or nullopt: every step granted, or (ssp) it is
  // as far ahead of the slowest as the bound allows. A worker holding its
  // whole lease is given its lowest step again (step_budget::grant).
  std::optional<int64_t> next_grant(int32_t worker) {
    bool repeat = budget_.held(worker) >= static_cast<size_t>(budget_.lease());
    if (!repeat && !bound_.may_start(worker))
      return std::nullopt;
    auto step = budget_.grant(worker);
    if (step && !repeat)
      bound_.started(worker);
    if (step)
      active(worker);
    return step;
  }

  void active(int32_t worker) { active_[worker] = now_(); }

  // Revoked steps go to the waiting workers at once, else stay in the pool.
  void hand_out_returned() {
    if (!held_)
      resume();
  }

  step_budget budget_;
  int64_t max_refused_;
  grant_signer signer_;
  staleness_bound bound_;
  int64_t refused_ = 0;
  bool held_ = false;
  std::multimap<int32_t, Reply> waiting_; // worker -> its replies, lowest index served first
  std::function<clock::time_point()> now_;
  std::map<int32_t, clock::time_point> active_; // each worker's last report or grant
};

} // namespace troupe
