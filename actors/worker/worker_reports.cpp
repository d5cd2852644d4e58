// The worker's reports to its coordinator and the grants that answer them,
// on one of two paths behind send_reports/report_step: the report channel
// (actors/net/report_channel.hpp) where the plan offers one (async, a chief
// in another process), else requests over BASP. Either way an answer counts
// only in the recovery generation it was asked in.
#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/net/ticket_book.hpp"
#include "actors/protocol/report_frames.hpp"
#include "actors/worker/worker_run.hpp"

namespace troupe::worker_run {

namespace {

// The answer to a report: a step to compute (now, or after the one under
// way), or stop.
void on_grant(self_ptr self, const step_grant& grant) {
  auto& st = self->state;
  if (grant.stop) {
    spdlog::info("{}: stop after {} local step(s)", st.label, st.local_step);
    self->quit(caf::exit_reason::normal);
    return;
  }
  st.lease.grant(grant);
  start_next_step(self);
}

// The answer to a batch of reports: the steps that fill the lease again
// (none while the worker still holds some), or stop.
void on_grants(self_ptr self, const std::vector<step_grant>& grants) {
  auto& st = self->state;
  for (auto& grant : grants)
    if (grant.stop) {
      on_grant(self, grant);
      return;
    }
  for (auto& grant : grants)
    st.lease.grant(grant);
  start_next_step(self);
}

// Reports `report` to `to`; the answer (the next step) arrives while the
// worker computes a step it holds already, if any.
template <class Atom, class Handle>
void ask_over_basp(self_ptr self, const Handle& to, const step_report& report) {
  auto& st = self->state;
  self->request(to, st.config.step_timeout, Atom::value, report)
    .then(
      [self, gen = st.recovery.generation()](const step_grant& grant) {
        if (self->state.recovery.current(gen))
          on_grant(self, grant);
      },
      [self, gen = st.recovery.generation()](caf::error& err) {
        if (self->state.recovery.current(gen))
          wait_for_recovery(self, "waiting for the next step failed", err);
      });
}

// The line is gone: the answers still due on it are lost with it, as a
// failed request over BASP would lose its grant (a leaving worker stops
// waiting for them). Reports go over BASP from here on.
void drop_line(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.report_line.reset();
  st.report_key = 0;
  bool waited = !st.asked_on_line.empty();
  st.asked_on_line.clear();
  if (st.leaving)
    start_next_step(self);
  else if (waited)
    wait_for_recovery(self, "the report channel to the chief broke",
                      caf::make_error(caf::sec::runtime_error, why));
}

// Sends the batch on the report channel, unless the worker leaves (its last
// reports then go over BASP, ahead of its end on the same connection, so
// that the chief counts them before it sees the worker gone) or has none;
// false where the caller sends it over BASP.
bool sent_on_line(self_ptr self, const step_report* reports, size_t n) {
  auto& st = self->state;
  if (!st.report_line || st.leaving)
    return false;
  bulk::meta_writer fields;
  write_reports(fields, reports, n);
  if (auto request = st.report_line->send(fields, st.config.step_timeout)) {
    st.asked_on_line[*request] = st.recovery.generation();
    return true;
  }
  drop_line(self, "a report could not be sent");
  return false;
}

} // namespace

void report_step(self_ptr self, const step_report& report) {
  if (!sent_on_line(self, &report, 1))
    ask_over_basp<report_atom>(self, self->state.coordinator, report);
}

void report_nonfinite(self_ptr self) {
  self->state.metrics->refused_steps.add(); // nothing pushed; the chief grants it again
  ask_over_basp<nonfinite_atom>(self, self->state.links.chief, self->state.step->report());
}

void send_reports(self_ptr self) {
  auto& st = self->state;
  auto batch = st.reports.take();
  if (batch.empty())
    batch.push_back(st.step->ask()); // an ask: names no step of this worker's
  if (sent_on_line(self, batch.data(), batch.size()))
    return;
  self->request(st.links.chief, st.config.step_timeout, reports_atom::value, std::move(batch))
    .then(
      [self, gen = st.recovery.generation()](const std::vector<step_grant>& grants) {
        if (self->state.recovery.current(gen))
          on_grants(self, grants);
      },
      [self, gen = st.recovery.generation()](caf::error& err) {
        if (self->state.recovery.current(gen))
          wait_for_recovery(self, "waiting for the next steps failed", err);
      });
}

void open_report_line(self_ptr self, const training_plan& plan) {
  auto& st = self->state;
  st.report_line.reset(); // the plan before's, if any
  st.asked_on_line.clear();
  st.report_key = 0;
  if (plan.report_port == 0 || st.links.bulk.chief_host.empty()
      || st.links.chief.node() == self->node())
    return;
  maybe_failure error;
  auto within = std::min<std::chrono::milliseconds>(st.config.request_timeout,
                                                    std::chrono::seconds(10));
  auto line = report_link::open(
    st.links.bulk.chief_host, plan.report_port, plan.run, plan.report_ticket, st.label,
    std::chrono::steady_clock::now() + within, error, st.links.bulk.tls.get());
  if (!line) {
    spdlog::warn("{}: no report channel to the chief ({}); reporting over the control connection",
                 st.label, error ? error->message : "refused");
    return;
  }
  st.report_key = draw_secret();
  auto me = caf::actor_cast<caf::actor_addr>(self); // weak: the line must not keep it alive
  auto most = static_cast<size_t>(plan.lease);
  line->start(
    [me, key = st.report_key, most](uint64_t request, bulk::meta_reader& fields) {
      auto to = caf::actor_cast<caf::actor>(me);
      if (!to)
        return;
      std::vector<step_grant> grants;
      if (read_grants(fields, most, grants))
        caf::anon_send(to, granted_atom::value, key, request, std::move(grants));
      else
        caf::anon_send(to, granted_atom::value, key,
                       std::string("the chief's answer holds malformed grants"));
    },
    [me, key = st.report_key](const failure& why) {
      if (auto to = caf::actor_cast<caf::actor>(me))
        caf::anon_send(to, granted_atom::value, key, why.message);
    });
  st.report_line = std::move(line);
}

void on_line_grants(self_ptr self, uint64_t key, uint64_t request,
                    std::vector<step_grant>& grants) {
  auto& st = self->state;
  auto asked = st.asked_on_line.find(request);
  if (key != st.report_key || asked == st.asked_on_line.end())
    return; // a line of a plan before (or a stranger's guess)
  auto generation = asked->second;
  st.asked_on_line.erase(asked);
  if (!st.recovery.current(generation))
    return;
  if (st.reports.batched())
    on_grants(self, grants);
  else if (grants.size() == 1)
    on_grant(self, grants.front());
  else
    wait_for_recovery(
      self, "the chief answered a report with " + std::to_string(grants.size()) + " grants",
      make_error({errc::invalid_request, "one grant expected"}));
}

void on_line_lost(self_ptr self, uint64_t key, const std::string& why) {
  if (key == self->state.report_key)
    drop_line(self, why);
}

} // namespace troupe::worker_run
