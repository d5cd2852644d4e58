#include "actors/token_queue/token_queue.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace troupe {

namespace {

using self_ptr = token_queue_actor::stateful_pointer<token_queue_state>;

void release(self_ptr self) {
  auto& st = self->state;
  for (auto& rp : st.waiting)
    rp.deliver(st.ledger.grant());
  st.waiting.clear();
}

} // namespace

token_queue_actor::behavior_type
token_queue(token_queue_actor::stateful_pointer<token_queue_state> self, token_queue_config config,
            chief_actor chief) {
  self->state.ledger = token_ledger{config.shards, config.last_step};
  self->state.chief = std::move(chief);
  return {
    [self](report_atom, const step_report& r) -> caf::result<step_grant> {
      auto& st = self->state;
      if (auto now = st.ledger.report(r))
        return *now;
      auto rp = self->make_response_promise<step_grant>();
      st.waiting.push_back(rp);
      return rp;
    },
    [self](applied_atom, int32_t, int64_t step, double straggler_ms) {
      auto& st = self->state;
      auto done = st.ledger.applied(step, straggler_ms, st.waiting.size());
      if (done.empty())
        return;
      release(self);
      for (auto& summary : done)
        self->send(st.chief, step_done_atom::value, summary);
    },
    [self](stop_atom) {
      self->state.ledger.stop();
      release(self);
    },
  };
}

} // namespace troupe
