// The shard's embedding tables as messages see them: pulls of rows (never
// inserting), pushes of rows (applied at once, or summed for a sync step),
// rows restored from a checkpoint, and the tables' figures. The checks and
// the state are table_store's; this file adds the run's and sender's checks.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/ps/shard_run.hpp"

namespace troupe::shard_run {

// Rows of an embedding table: values as they are now (an unseen key's
// initial value), never inserting.
caf::result<tensor> on_rows(self_ptr self, run_id run, int32_t table, const row_keys& keys) {
  auto& st = self->state;
  if (auto err = unless_this_run(self, run, "a pull of rows"))
    return err;
  tensor out;
  if (auto err = st.tables.lookup(table, keys.keys, out)) {
    spdlog::warn("{}: refused a pull of rows: {}", st.label, err->message);
    return make_error(*err);
  }
  st.traffic.pulled_rows(keys.keys.size(), out.bytes());
  return out;
}

caf::result<int64_t> on_push_rows(self_ptr self, run_id run, int32_t worker, int64_t step,
                                  uint64_t proof, int32_t table, const row_keys& keys,
                                  const tensor& grads) {
  auto& st = self->state;
  if (auto err = unless_this_run(self, run, "a push of rows"))
    return err;
  if (auto err = unless_granted(self, worker, step, proof))
    return err;
  st.traffic.pushed_rows(keys.keys.size(), grads.bytes());
  if (!st.pending) {
    if (auto err = st.tables.apply(table, keys.keys, keys.counts, grads)) {
      spdlog::warn("{}: refused rows of step {}: {}", st.label, step, err->message);
      return make_error(*err);
    }
    return st.store->version();
  }
  if (step >= st.options.last_step)
    return make_error({errc::training_stopped,
                       "step " + std::to_string(step) + " is past last_step on " + st.label});
  sync_verdict verdict;
  if (auto err = st.tables.add(worker, step, table, keys.keys, keys.counts, grads, verdict))
    return make_error(*err);
  return answer_sync(self, verdict, "rows", worker, step, st.tables.step());
}

// Rows of a checkpoint's embedding table, from the chief.
caf::result<caf::ok_atom> on_restore_rows(self_ptr self, run_id run, const restored_rows& rows) {
  auto& st = self->state;
  if (auto err = unless_from_chief(self, "restored rows"))
    return err;
  if (auto err = unless_this_run(self, run, "restored rows"))
    return err;
  if (auto err = st.tables.restore(rows.table, rows.keys, rows.frequencies, rows.last_updates,
                                   rows.payloads))
    return make_error(*err);
  return caf::ok_atom::value;
}

std::vector<table_report> table_reports(self_ptr self) {
  auto& st = self->state;
  std::vector<table_report> out;
  for (size_t t = 0; t < st.tables.size(); ++t) {
    auto figures = st.tables.figures(t, 10);
    table_report r{st.tables.name(t),
                   figures.rows,
                   figures.bytes,
                   figures.admitted,
                   figures.evicted,
                   figures.not_admitted,
                   {},
                   {}};
    for (auto& [key, count] : figures.hottest) {
      r.hottest_keys.push_back(key);
      r.hottest_counts.push_back(count);
    }
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace troupe::shard_run
