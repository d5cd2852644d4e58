#include "actors/token_queue/token_queue.hpp"

#include <algorithm>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace troupe {

namespace {

using self_ptr = token_queue_actor::stateful_pointer<token_queue_state>;

const std::string label = "token queue";

void release(self_ptr self) {
  auto& st = self->state;
  for (auto& [worker, rp] : st.waiting)
    rp.deliver(st.signer.sign(worker, st.ledger.grant()));
  st.waiting.clear();
}

bool from_chief(self_ptr self) {
  auto sender = self->current_sender();
  return sender && sender->address() == self->state.chief.address();
}

caf::result<step_grant> on_report(self_ptr self, const step_report& r) {
  auto& st = self->state;
  auto sender = self->current_sender();
  auto admitted = st.workers.find(r.worker);
  if (r.run != st.run || admitted == st.workers.end() || !sender
      || sender->address() != admitted->second)
    return refuse(label, "a report claiming worker:" + std::to_string(r.worker), sender,
                  "only the worker the chief admitted under that index, of this run, reports "
                  "for it");
  // A step reported applied without every shard's receipt was not pushed:
  // refused before it waits on an update that would need it.
  if (!st.receipts.proven(r))
    return refuse(label,
                  "the report of step " + std::to_string(r.step)
                    + " of worker:" + std::to_string(r.worker),
                  sender, "it says the step was applied but shows no receipt of every shard");
  if (r.step >= 0)
    st.positions[r.worker] = {r.data_epoch, r.data_offset, r.share_rank, r.share_count};
  if (auto now = st.ledger.report(r))
    return st.signer.sign(r.worker, *now);
  auto rp = self->make_response_promise<step_grant>();
  st.waiting.emplace_back(r.worker, rp);
  return rp;
}

void on_applied(self_ptr self, run_id run, int64_t step, double straggler_ms) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (run != st.run || !sender
      || std::find(st.shards.begin(), st.shards.end(), sender->address()) == st.shards.end()) {
    refuse(label, "an applied message", sender, "only the run's shards send it");
    return;
  }
  auto done = st.ledger.applied(step, straggler_ms, st.waiting.size());
  if (done.empty())
    return;
  auto& last = done.back();
  for (auto& [worker, position] : st.positions) {
    last.position_workers.push_back(worker);
    last.position_epochs.push_back(position.epoch);
    last.position_offsets.push_back(position.offset);
    last.position_share_ranks.push_back(position.share_rank);
    last.position_share_counts.push_back(position.share_count);
  }
  // The chief hears of the update before any worker gets its token: a
  // worker that ends on a stop token (last_step) is finishing, not leaving.
  for (auto& summary : done)
    self->send(st.chief, step_done_atom::value, summary);
  release(self);
}

} // namespace

token_queue_actor::behavior_type
token_queue(token_queue_actor::stateful_pointer<token_queue_state> self, token_queue_config config,
            chief_actor chief) {
  auto& st = self->state;
  st.ledger = token_ledger{static_cast<int32_t>(config.shards.size()), config.last_step,
                           config.first_step};
  st.run = config.run;
  st.signer = grant_signer{config.key, config.run};
  st.receipts = std::move(config.receipts);
  st.shards = std::move(config.shards);
  st.chief = std::move(chief);
  return {
    [self](report_atom, const step_report& r) { return on_report(self, r); },
    [self](applied_atom, run_id run, int32_t, int64_t step, double straggler_ms) {
      on_applied(self, run, step, straggler_ms);
    },
    [self](admit_atom, int32_t index, const worker_actor& worker) {
      if (!from_chief(self)) {
        refuse(label, "an admission", self->current_sender(), "only the chief admits workers");
        return;
      }
      self->state.workers[index] = worker.address();
    },
    [self](stop_atom) {
      if (!from_chief(self)) {
        refuse(label, "a stop", self->current_sender(), "only the chief stops it");
        return;
      }
      self->state.ledger.stop();
      release(self);
    },
  };
}

} // namespace troupe
