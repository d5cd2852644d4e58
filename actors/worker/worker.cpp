// The worker actor: its state set up, its handlers and its behaviour. The
// steps, the plan and recovery are in worker_steps.cpp, worker_plan.cpp and
// worker_recovery.cpp (worker_run.hpp); the step itself and the decisions
// in plain classes (worker_step, step_lease, report_batch, recovery_wait).
#include "actors/worker/worker.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/exchange/basp_path.hpp"
#include "actors/worker/worker_run.hpp"

namespace troupe {

namespace worker_run {

void fail(self_ptr self, const std::string& what, const caf::error& err, run_end kind) {
  spdlog::error("{}: {}: {}; stopping this worker", self->state.label, what, describe(err));
  // A failure no end names keeps its error (a library user can read its code).
  self->quit(kind == run_end::failed ? err : end_error(kind, what + ": " + describe(err)));
}

bool from_chief_or_here(self_ptr self, const caf::strong_actor_ptr& source) {
  if (!source)
    return false;
  auto addr = caf::actor_cast<caf::actor_addr>(source);
  return addr == self->state.links.chief.address() || addr.node() == self->node();
}

} // namespace worker_run

namespace {

using namespace worker_run;

void setup(self_ptr self, worker_config config, worker_links links) {
  auto& st = self->state;
  st.label = "worker:" + std::to_string(config.index);
  st.metrics.emplace(metrics::worker_metrics::make(config.index));
  metrics::readiness(st.label).set(0); // until it holds a plan
  st.config = config;
  st.links = std::move(links);
  auto& data_options = st.data_options;
  data_options.index = static_cast<size_t>(config.index);
  data_options.count = static_cast<size_t>(config.num_workers); // the plan names the share
  data_options.seed = config.seed;
  data_options.shuffle = config.shuffle;
  data_options.shuffle_buffer = config.shuffle_buffer;
  data_options.prefetch = config.prefetch;
  data_options.batch_size = static_cast<size_t>(config.batch_size);
  st.progress = progress_meter{config.log_interval};
  st.recovery = recovery_wait{config.recovery_timeout};
  st.basp = std::make_unique<basp_path<std::remove_pointer_t<self_ptr>>>(self, st.links.shards,
                                                                         config.request_timeout);
  st.exchange = std::make_unique<shard_exchange>(*st.basp, config.request_timeout);
  step_settings settings{config.index,     config.pull_ahead, config.wire_precision,
                         config.push_topk, config.clip_norm,  config.max_norm};
  st.step = std::make_unique<worker_step>(*st.exchange, st.label, settings, hooks_of(self));
}

void install_handlers(self_ptr self) {
  self->set_down_handler([self](const caf::down_msg& msg) { on_down(self, msg); });
  // Only this process ends a worker with an exit message (its chief sends
  // stop); an exception ends it at once with the error logged, so its task
  // exits non-zero.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (msg.source && msg.source.node() == self->node())
      self->quit(msg.reason);
    else
      spdlog::warn("{}: ignored an exit message from another process", self->state.label);
  });
  self->set_exception_handler([self](std::exception_ptr& eptr) -> caf::error {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{}: died of an exception: {}; stopping this worker", self->state.label, what);
    return caf::make_error(caf::sec::runtime_error, what);
  });
}

} // namespace

worker_impl::behavior_type worker(worker_impl::stateful_pointer<worker_state> self,
                                  worker_config config, worker_links links) {
  setup(self, config, std::move(links));
  self->monitor(self->state.links.chief);
  for (auto& shard : self->state.links.shards)
    self->monitor(shard);
  install_handlers(self);
  ask_for_plan(self);
  return {
    [self](hello_atom, uint32_t version, const std::string& job, int32_t task) {
      return answer_hello(version, job, task, self->state.label);
    },
    [self](run_atom, uint64_t step_end) {
      if (self->state.lease.latest(step_end))
        start_next_step(self);
    },
    [self](rejoin_atom) { rejoin(self); },
    [self](rejoin_atom, const chief_actor& chief) {
      if (self->current_sender() && self->current_sender()->node() == self->node())
        on_chief_back(self, chief);
    },
    [self](rejoin_atom, const std::string& why) {
      if (self->current_sender() && self->current_sender()->node() == self->node())
        fail(self, "the chief did not come back", make_error({errc::training_stopped, why}),
             run_end::lost_peer);
    },
    [self](plan_atom, training_plan& plan) { on_restored_plan(self, plan); },
    [self](share_atom, int32_t rank, int32_t count) { on_share(self, rank, count); },
    [self](leave_atom) {
      if (self->current_sender() && self->current_sender()->node() == self->node())
        leave(self);
    },
    [self](tick_atom) { on_tick(self); },
    [self](granted_atom, uint64_t key, uint64_t request, std::vector<step_grant>& grants) {
      on_line_grants(self, key, request, grants);
    },
    [self](granted_atom, uint64_t key, const std::string& why) { on_line_lost(self, key, why); },
    [self](stop_atom) {
      if (!from_chief_or_here(self, self->current_sender())) {
        refuse(self->state.label, "a stop", self->current_sender(), "only its chief stops it");
        return;
      }
      spdlog::info("{}: stopped by the chief after {} local step(s)", self->state.label,
                   self->state.local_step);
      self->quit(caf::exit_reason::normal);
    },
    [self](stop_atom, int32_t code, const std::string& why) {
      if (!from_chief_or_here(self, self->current_sender())) {
        refuse(self->state.label, "an abort", self->current_sender(), "only its chief stops it");
        return;
      }
      auto end = run_end_of(code);
      spdlog::log(end == run_end::preempted ? spdlog::level::warn : spdlog::level::err,
                  "{}: the chief ended the run ({}) after {} local step(s): {}", self->state.label,
                  name_of(end), self->state.local_step, why);
      self->quit(end_error(end, "the chief ended the run: " + why));
    },
  };
}

} // namespace troupe
