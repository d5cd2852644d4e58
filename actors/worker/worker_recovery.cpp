// The worker while its run recovers: a lost shard (the chief restores the
// run and sends a new plan) or a lost chief (a helper finds the restarted
// one at its address), each within cluster.recovery-timeout.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/worker/worker_run.hpp"

namespace troupe::worker_run {

namespace {

bool can_recover(self_ptr self) {
  auto& st = self->state;
  return static_cast<bool>(st.links.reconnect) && st.config.recovery_timeout.count() > 0;
}

} // namespace

// A peer is gone or a request of the run failed: the chief restores the run
// and sends a new plan (a lost shard), or the worker finds the restarted
// chief (a lost chief). What the step had under way is void from here.
void wait_for_recovery(self_ptr self, const std::string& why, const caf::error& err) {
  auto& st = self->state;
  if (!can_recover(self)) {
    fail(self, why, err, run_end::lost_peer);
    return;
  }
  st.step->drop();
  if (!st.recovery.begin()) {
    spdlog::info("{}: while waiting, also {}: {}", st.label, why, describe(err));
    return;
  }
  st.metrics->recoveries.add();
  metrics::readiness(st.label).set(0);
  spdlog::warn("{}: {}: {}; waiting up to {} ms for the run to recover (cluster.recovery-timeout)",
               st.label, why, describe(err), st.config.recovery_timeout.count());
  self->delayed_send(self, st.config.recovery_timeout, tick_atom::value);
}

bool reconnect_lost_shards(self_ptr self) {
  auto& st = self->state;
  for (auto shard : st.recovery.take_lost_shards()) {
    auto back = st.links.reconnect.shard(shard, st.config.recovery_timeout);
    if (!back) {
      fail(self, "ps:" + std::to_string(shard) + " did not come back", back.error(),
           run_end::lost_peer);
      return false;
    }
    st.links.shards[static_cast<size_t>(shard)] = *back;
    self->monitor(*back);
  }
  return true;
}

// The chief was lost: a helper finds the restarted one at its address (a
// connect can hang on a frozen peer, so not on this actor's thread, whose
// deadline must fire).
void rejoin(self_ptr self) {
  auto& st = self->state;
  auto reconnect = st.links.reconnect.chief;
  auto within = st.config.recovery_timeout;
  auto worker = caf::actor_cast<caf::actor>(self);
  self->spawn<caf::detached>([=](caf::event_based_actor* helper) {
    auto chief = reconnect(within);
    if (chief)
      helper->send(worker, rejoin_atom::value, *chief);
    else
      helper->send(worker, rejoin_atom::value, describe(chief.error()));
  });
}

// The chief answers again: reconnect any shard lost meanwhile and ask it for
// the plan, as at the start.
void on_chief_back(self_ptr self, const chief_actor& chief) {
  auto& st = self->state;
  if (!st.recovery.waiting())
    return;
  st.links.chief = chief;
  self->monitor(chief);
  if (!reconnect_lost_shards(self))
    return;
  spdlog::info("{}: reached the chief again; asking for its plan", st.label);
  ask_for_plan(self);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (st.recovery.expired())
    fail(self, "the run did not recover",
         make_error({errc::training_stopped, "nothing within "
                                               + std::to_string(st.config.recovery_timeout.count())
                                               + " ms (cluster.recovery-timeout)"}),
         run_end::lost_peer);
}

void on_down(self_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.reason == caf::exit_reason::normal) {
    // The chief ends normally only once the run is over: a worker that
    // joined too late (its ready or its first asks still open) stops too,
    // instead of waiting out its timeouts. A shard's normal end is the
    // run's: the chief's stop follows.
    if (msg.source == st.links.chief.address()) {
      spdlog::info("{}: the chief finished the run; stop after {} local step(s)", st.label,
                   st.local_step);
      self->quit(caf::exit_reason::normal);
    }
    return;
  }
  if (msg.source == st.links.chief.address()) {
    wait_for_recovery(self, "lost the chief", msg.reason);
    if (can_recover(self))
      self->send(self, rejoin_atom::value);
    return;
  }
  for (size_t s = 0; s < st.links.shards.size(); ++s)
    if (msg.source == st.links.shards[s].address()) {
      st.recovery.lost_shard(static_cast<int32_t>(s));
      wait_for_recovery(self, "lost ps:" + std::to_string(s), msg.reason);
      return;
    }
}

} // namespace troupe::worker_run
