// The chief's workers: who may join under which index, and what a loss or
// a departure changes. One live worker per index of the cluster (or up to
// cluster.max-workers: elastic membership); a second start of the same
// task is refused, a restarted one rejoins. Joiners and leavers change
// every member's share of the data from its next epoch on.
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"

namespace troupe::chief_run {

namespace {

// The membership changed: every live member but `except` (its plan says
// it) reads its new share from its next epoch on.
void reshare(self_ptr self, int32_t except) {
  auto& st = self->state;
  spdlog::info("chief: {} worker(s) take part; their data shares change where their next epoch "
               "begins",
               st.membership->count());
  for (auto& [index, addr] : st.roster->live()) {
    if (index == except || !st.membership->member(index))
      continue;
    auto share = st.membership->share_of(index);
    self->send(caf::actor_cast<worker_actor>(addr), share_atom::value, share.rank, share.count);
  }
}

void admit(self_ptr self, int32_t index, const worker_actor& worker) {
  auto& st = self->state;
  st.roster->admit(index, worker.address());
  st.admission_of[index] = ++st.admissions; // its report connections carry this number
  self->monitor(worker);
  if (st.membership->joined(index)) {
    spdlog::info("chief: worker:{} joined at step {}", index, global_step(self));
    reshare(self, index);
  }
  st.steps->admitted(self, index, worker);
}

// The plan for an admitted worker, now or once the shards are initialised.
caf::result<training_plan> plan_or_promise(self_ptr self, int32_t index) {
  auto& st = self->state;
  if (st.now != chief_state::phase::initializing && st.router)
    return plan_message(self, index);
  if (st.now != chief_state::phase::initializing)
    return make_error({errc::training_stopped, "the run ended before it was initialised"});
  auto rp = self->make_response_promise<training_plan>();
  st.waiting_ready.emplace_back(index, rp);
  return rp;
}

// Another actor holds `index`: it may be a crashed worker whose loss is not
// noticed yet, or a live one. A probe decides: an answer means a second start
// of the same task (refused); none within the request timeout means the old
// one is gone, and the new one takes over.
caf::result<training_plan> contest(self_ptr self, int32_t index, worker_actor candidate,
                                   caf::actor_addr holder) {
  auto& st = self->state;
  auto sender = self->current_sender(); // before the promise takes the request over
  auto rp = self->make_response_promise<training_plan>();
  auto old = caf::actor_cast<worker_actor>(holder);
  self
    ->request(old, st.config.runtime.request_timeout, hello_atom::value, protocol_version,
              std::string("chief"), int32_t{0})
    .then(
      [=](uint32_t) mutable {
        rp.deliver(refuse("chief", "a second worker:" + std::to_string(index), sender,
                          "worker:" + std::to_string(index)
                            + " is running and answers; start each worker task once"));
      },
      [=](caf::error&) mutable {
        auto& st = self->state;
        if (st.roster->holder(index) == holder) {
          spdlog::warn("chief: worker:{} does not answer; the one starting now takes over", index);
          st.roster->leave(holder);
          on_worker_down(self, index, caf::exit_reason::kill);
        }
        if (st.roster->check(index, candidate.address())
            == worker_roster<caf::actor_addr>::claim::taken) {
          rp.deliver(refuse("chief", "a second worker:" + std::to_string(index), sender,
                            "another worker took the index meanwhile"));
          return;
        }
        admit(self, index, candidate);
        if (st.now == chief_state::phase::initializing)
          st.waiting_ready.emplace_back(index, rp);
        else if (st.router)
          rp.deliver(plan_message(self, index));
        else
          rp.deliver(make_error({errc::training_stopped, "the run ended before it started"}));
      });
  return rp;
}

} // namespace

caf::result<training_plan> on_ready(self_ptr self, int32_t index) {
  auto& st = self->state;
  auto sender = self->current_sender();
  auto candidate = caf::actor_cast<worker_actor>(sender);
  if (!candidate)
    return refuse("chief", "a ready request", sender, "it has no sender to answer");
  using claim = worker_roster<caf::actor_addr>::claim;
  switch (st.roster->check(index, candidate.address())) {
    case claim::out_of_range:
      return refuse("chief", "a ready request of worker:" + std::to_string(index), sender,
                    "the cluster has worker indices 0.." + std::to_string(st.roster->size() - 1)
                      + " (cluster.max-workers admits more)");
    case claim::taken:
      return contest(self, index, candidate, *st.roster->holder(index));
    case claim::fresh:
      admit(self, index, candidate);
      break;
    case claim::again:
      break;
  }
  auto plan = plan_or_promise(self, index);
  finish_when_every_worker_came(self);
  return plan;
}

void on_worker_down(self_ptr self, int32_t index, const caf::error& reason) {
  auto& st = self->state;
  st.last_worker_seen = chief_state::clock::now();
  st.admission_of.erase(index);
  if (st.report_desk)
    st.report_desk->close_worker(index);
  bool running = st.now == chief_state::phase::initializing
                 || st.now == chief_state::phase::training;
  bool normal = !reason || reason == caf::exit_reason::normal;
  // Killed or cut off: survivable. Any other reason is the worker's own error.
  bool lost = reason == caf::exit_reason::kill || reason == caf::exit_reason::user_shutdown
              || reason == caf::exit_reason::remote_link_unreachable;
  if (normal && !running)
    spdlog::info("chief: worker:{} finished", index);
  if (normal && running) { // SIGTERM, a scale-down: the others share its data
    ++st.left_workers;
    spdlog::info("chief: worker:{} left at step {}; {} worker(s) still training", index,
                 global_step(self), st.roster->live().size());
    if (st.membership->left(index))
      reshare(self, -1);
  }
  if (running && !normal) {
    if (lost)
      st.roster->lost();
    else
      st.roster->failed(index, describe(reason));
    spdlog::warn("chief: {} worker:{} ({}); {} worker(s) left; a restarted worker rejoins",
                 lost ? "lost" : "failed:", index, self->system().render(reason),
                 st.roster->live().size());
  }
  st.steps->worker_down(self, index, running);
}

namespace {

// A worker the chief will not hear from any more: it no longer holds its
// index, its steps go to the others, and it is told why (it quits and its
// task exits 1). Its share of the data stays its own until it comes back,
// as a lost worker's does.
void drop_worker(self_ptr self, int32_t index, const std::string& why) {
  auto& st = self->state;
  auto holder = st.roster->holder(index);
  if (!holder)
    return;
  spdlog::error("chief: worker:{} {}; it is dropped from the run and its steps go to the others",
                index, why);
  st.dropped_workers.push_back("worker:" + std::to_string(index) + " " + why);
  st.roster->leave(*holder);
  st.admission_of.erase(index);
  if (st.report_desk)
    st.report_desk->close_worker(index);
  if (auto worker = caf::actor_cast<worker_actor>(caf::actor_cast<caf::strong_actor_ptr>(*holder)))
    self->send(worker, stop_atom::value, static_cast<int32_t>(run_end::failed),
               "the chief dropped this worker: it " + why);
  st.steps->worker_down(self, index, true);
}

} // namespace

caf::error unless_proven(self_ptr self, const step_report& r) {
  auto& st = self->state;
  if (st.receipts.proven(r))
    return caf::none;
  auto why = "reported step " + std::to_string(r.step)
             + " applied without the receipt of every shard it pushes to: it did not push it";
  drop_worker(self, r.worker, why);
  return make_error({errc::unauthorized, "chief refused the report of worker:"
                                           + std::to_string(r.worker) + ": it " + why});
}

caf::error unless_admitted(self_ptr self, const step_report& r, const char* what) {
  auto& st = self->state;
  auto sender = self->current_sender();
  auto holder = st.roster->holder(r.worker);
  // A relayed batch's connection was checked against the admission already.
  bool relayed = st.relaying && st.relaying->worker == r.worker;
  if (r.run == st.run && holder && (relayed || (sender && sender->address() == *holder)))
    return caf::none;
  return refuse("chief", std::string(what) + " claiming worker:" + std::to_string(r.worker), sender,
                r.run != st.run ? "it belongs to another run"
                                : "only the worker admitted under that index reports for it");
}

} // namespace troupe::chief_run
