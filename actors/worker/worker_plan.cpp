// The worker's plan: the chief's placement checked against the model, the
// data continued where the checkpoint says, and the bulk links to the shards
// in other processes opened before the first step is asked for.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <optional>

#include "actors/exchange/link_opening.hpp"
#include "actors/worker/worker_run.hpp"

namespace troupe::worker_run {

namespace {

// The share as the plan says it, or nullopt (the worker stops) where the
// chief names one this data set cannot give.
std::optional<data_share> share_in(self_ptr self, int32_t rank, int32_t count) {
  if (count < 1 || rank < 0 || rank >= count) {
    fail(self,
         "the chief named data share " + std::to_string(rank) + " of " + std::to_string(count),
         make_error({errc::invalid_request, "no such share"}));
    return std::nullopt;
  }
  return data_share{static_cast<size_t>(rank), static_cast<size_t>(count)};
}

// The data: read from the first plan on, in the share it names, and
// continued where the checkpoint's position says; false (the worker stops)
// when they cannot.
bool seek_data(self_ptr self, const training_plan& plan) {
  auto& st = self->state;
  auto share = share_in(self, plan.share_rank, plan.share_count);
  auto next = share_in(self, plan.next_share_rank, plan.next_share_count);
  if (!share || !next)
    return false;
  try {
    if (!st.data) {
      st.data_options.share = *share;
      st.data = std::make_unique<example_stream>(st.links.train, st.data_options);
    }
    st.data->set_next_share(*next); // also replaces one told before a recovery
    if (plan.data_epoch == 0 && plan.data_offset == 0 && st.data->position().share == *share)
      return true;
    st.data->seek({plan.data_epoch, plan.data_offset, *share});
    // Every step so far read one batch: the dropout masks continue from there.
    auto examples = plan.data_epoch * st.data->share_size() + plan.data_offset;
    st.links.net->skip_training_steps(examples / static_cast<uint64_t>(st.config.batch_size),
                                      st.config.batch_size);
  } catch (const std::exception& e) {
    fail(self, "cannot continue at the checkpoint's data position",
         make_error({errc::invalid_request, e.what()}));
    return false;
  }
  if (st.data->follows())
    spdlog::info("{}: continuing the followed directory at file number {}, record {} (share {} "
                 "of {})",
                 st.label, plan.data_epoch, plan.data_offset, share->rank, share->count);
  else
    spdlog::info("{}: continuing its data at epoch {}, example {} of its share ({} of {})",
                 st.label, plan.data_epoch, plan.data_offset, share->rank, share->count);
  return true;
}

// The plan's tables are the model's, in its order and with its row widths;
// false (the worker stops) where they disagree.
bool tables_fit(self_ptr self, const training_plan& plan) {
  auto& st = self->state;
  auto& tables = st.links.net->tables();
  bool fit = tables.size() == plan.tables.size();
  for (size_t t = 0; fit && t < tables.size(); ++t)
    fit = plan.tables[t].table.dim == tables[t].dim;
  if (!fit)
    fail(self, "the chief's plan holds other embedding tables than this worker's model",
         make_error({errc::invalid_request, "tables differ"}));
  return fit;
}

void on_plan(self_ptr self, training_plan& plan) {
  auto& st = self->state;
  st.step->drop(); // of the plan before, if any
  auto& vars = st.links.net->variables();
  try {
    st.router.emplace(std::move(plan.slices), vars, static_cast<int32_t>(st.links.shards.size()));
  } catch (const std::exception& e) {
    fail(self, "the chief's plan does not match this worker's model (" + st.links.net->name() + ")",
         make_error({errc::invalid_request, e.what()}));
    return;
  }
  if (!plan.coordinator) {
    fail(self, "the chief's plan names no step coordinator",
         make_error({errc::invalid_request, "empty coordinator"}));
    return;
  }
  if (plan.report_every < 1 || plan.report_every > plan.lease) {
    fail(self,
         "the chief's plan reports " + std::to_string(plan.report_every)
           + " steps at a time with a lease of " + std::to_string(plan.lease),
         make_error({errc::invalid_request, "report_every outside 1..lease"}));
    return;
  }
  st.coordinator = plan.coordinator;
  st.lease.reset(plan.lease);
  st.reports.reset(plan.report_every);
  st.recovery.over();
  bool own_batches = st.links.net->brings_batches(); // its program's: no data to seek
  if (!tables_fit(self, plan) || (!own_batches && !seek_data(self, plan)))
    return;
  try {
    st.step->reset(plan.run, *st.router, vars, st.links.net->staging(), plan.tables,
                   static_cast<int32_t>(st.links.shards.size()));
  } catch (const std::exception& e) {
    fail(self, "the chief's plan", make_error({errc::invalid_request, e.what()}));
    return;
  }
  st.step->read_from(st.data.get(), st.links.net.get());
  st.progress.restart();
  metrics::readiness(st.label).set(1);
  if (own_batches) {
    spdlog::info("{}: ready; its program brings the batches", st.label);
  } else {
    auto share = st.data->position().share;
    spdlog::info("{}: ready; training on {} of {} examples (share {} of {})", st.label,
                 st.data->share_size(), st.data->total_examples(), share.rank, share.count);
  }
  // Training starts once every shard answered whether it has a bulk path.
  auto gen = st.recovery.generation();
  open_bulk_links(
    self, *st.exchange, st.links.shards, st.links.bulk,
    {plan.run, st.config.index, st.label, st.config.request_timeout},
    [self, gen] { return self->state.recovery.current(gen); },
    [self, plan] {
      open_report_line(self, plan);
      ask_for_first_steps(self);
    },
    [self](size_t s, const caf::error& err) {
      wait_for_recovery(self, "asking ps:" + std::to_string(s) + " for its bulk path failed", err);
    });
}

} // namespace

void ask_for_plan(self_ptr self) {
  auto& st = self->state;
  auto planned = [self](training_plan& plan) { on_plan(self, plan); };
  auto refused = [self](caf::error& err) {
    fail(self, "the chief refused the ready request", err);
  };
  // A model its program declared goes with the request: the first one
  // places the run's variables, later ones are checked against it.
  if (auto* declared = st.links.net->declaration())
    self
      ->request(st.links.chief, st.config.ready_timeout, ready_atom::value, st.config.index,
                *declared)
      .then(planned, refused);
  else
    self->request(st.links.chief, st.config.ready_timeout, ready_atom::value, st.config.index)
      .then(planned, refused);
}

void on_restored_plan(self_ptr self, training_plan& plan) {
  auto& st = self->state;
  if (!from_chief_or_here(self, self->current_sender())) {
    refuse(st.label, "a plan", self->current_sender(), "only its chief plans its work");
    return;
  }
  spdlog::info("{}: the run was restored; continuing with run {}", st.label, plan.run);
  st.recovery.void_in_flight(); // whatever was in flight belongs to the run before
  if (reconnect_lost_shards(self))
    on_plan(self, plan);
}

void on_share(self_ptr self, int32_t rank, int32_t count) {
  auto& st = self->state;
  if (!from_chief_or_here(self, self->current_sender())) {
    refuse(st.label, "a data share", self->current_sender(), "only its chief shares the data");
    return;
  }
  auto share = share_in(self, rank, count);
  if (!share || !st.data)
    return; // the plan to come says the share
  try {
    st.data->set_next_share(*share);
  } catch (const std::exception& e) {
    fail(self, "the chief named a data share it cannot read",
         make_error({errc::invalid_request, e.what()}));
    return;
  }
  spdlog::info("{}: reads share {} of {} of the data from its next epoch on", st.label, rank,
               count);
}

} // namespace troupe::worker_run
