#include "actors/token_queue/token_queue.hpp"

#include <algorithm>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace troupe {

namespace {

using self_ptr = token_queue_actor::stateful_pointer<token_queue_state>;

void release(self_ptr self, step_grant grant) {
  auto& st = self->state;
  for (auto& rp : st.waiting)
    rp.deliver(grant);
  st.waiting.clear();
}

// Every shard has reached global_step + 1: the update is complete.
void advance(self_ptr self, const std::vector<double>& stragglers) {
  auto& st = self->state;
  ++st.global_step;
  step_summary summary;
  summary.step = st.global_step;
  summary.loss = st.applied_reports ? st.loss_sum / static_cast<double>(st.applied_reports) : 0;
  summary.correct = st.correct;
  summary.examples = st.examples;
  summary.straggler_ms = *std::max_element(stragglers.begin(), stragglers.end());
  summary.dropped = st.dropped;
  summary.tokens = st.tokens + st.waiting.size();
  st.loss_sum = 0;
  st.applied_reports = st.correct = st.examples = st.dropped = st.tokens = 0;
  st.stopped = st.global_step >= st.config.last_step;
  release(self, step_grant{st.global_step, st.stopped});
  self->send(st.chief, step_done_atom::value, summary);
}

} // namespace

token_queue_actor::behavior_type
token_queue(token_queue_actor::stateful_pointer<token_queue_state> self,
            token_queue_config config, chief_actor chief) {
  self->state.config = config;
  self->state.chief = std::move(chief);
  return {
    [self](report_atom, const step_report& r) -> caf::result<step_grant> {
      auto& st = self->state;
      if (r.step >= 0) {
        if (r.applied) {
          st.loss_sum += r.loss;
          ++st.applied_reports;
          st.correct += r.correct;
          st.examples += r.examples;
        } else {
          ++st.dropped;
        }
      }
      if (st.stopped)
        return step_grant{st.global_step, true};
      if (r.step < st.global_step) {
        ++st.tokens;
        return step_grant{st.global_step, false};
      }
      auto rp = self->make_response_promise<step_grant>();
      st.waiting.push_back(rp);
      return rp;
    },
    [self](applied_atom, int32_t, int64_t step, double straggler_ms) {
      auto& st = self->state;
      auto& reached = st.applied[step];
      reached.push_back(straggler_ms);
      // Shards apply steps in order, so updates complete in order as well.
      while (!st.applied.empty() && st.applied.begin()->first == st.global_step + 1
             && static_cast<int32_t>(st.applied.begin()->second.size()) >= st.config.shards) {
        auto stragglers = std::move(st.applied.begin()->second);
        st.applied.erase(st.applied.begin());
        advance(self, stragglers);
      }
    },
    [self](stop_atom) {
      auto& st = self->state;
      st.stopped = true;
      release(self, step_grant{st.global_step, true});
    },
  };
}

} // namespace troupe
