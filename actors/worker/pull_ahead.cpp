// train.pull-ahead: a worker's job, its pushes and the pulls of the step
// after next, behind the next step's compute (worker_steps.hpp).
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/worker/worker_steps.hpp"

namespace troupe::worker_steps {

// When step s is computed the worker starts job J(s): step s's pushes, then
// from each shard, once its push is answered, the values of the step after
// next. It then collects J(s-1) (step s-1's report, step s+1's values),
// waiting only if that job is not done, and computes step s+1 while J(s)
// moves: on the bulk path on the runner's thread, over BASP as replies that
// wait in the mailbox (each shard gets the push before the pull, so both
// paths pull after the push is applied). Step s+1 thus starts from every
// update but its own worker's step s: one step staler than without.

namespace {

// One reply of the job over BASP came in; the last one runs what waits.
void job_reply(self_ptr self) {
  auto& job = self->state.job;
  if (--job.pending == 0 && job.then) {
    auto then = std::move(job.then);
    job.then = nullptr;
    then();
  }
}

// Values pulled ahead into the variables, as take_pulled; the variables'
// previous storage goes back into `values`, where the next pull ahead lands.
bool take_pulled_ahead(self_ptr self, const slice_router::shard_part& part,
                       std::vector<tensor>& values) {
  auto& st = self->state;
  if (st.staging) // copied into the model's buffers: `values` stays as it is
    return take_pulled(self, part, values);
  std::vector<tensor> previous(values.size());
  for (size_t k = 0; k < values.size() && k < part.slices.size(); ++k)
    if (whole_variable(*st.router, part.slices[k]))
      previous[k] = std::move(st.params[st.router->variable_of(part.slices[k])]);
  if (!take_pulled(self, part, values))
    return false;
  for (size_t k = 0; k < previous.size(); ++k)
    if (whole_variable(*st.router, part.slices[k]))
      values[k] = std::move(previous[k]);
  return true;
}

} // namespace

// train.pull-ahead: a job under way is void (a lost peer, a new plan): its
// bulk exchanges are shut down (those links break and are dropped), its
// replies over BASP ignored, and the next step pulls afresh.
void drop_job(self_ptr self) {
  auto& st = self->state;
  if (st.runner)
    st.runner->cancel();
  st.job = {};
  st.values_ready = false;
  for (auto& link : st.bulk)
    if (link && link->broken())
      link.reset();
}

// Starts J for the step just computed (st.report): its pushes when
// `with_pushes`, then the pulls.
void start_job(self_ptr self, bool with_pushes) {
  auto& st = self->state;
  auto& job = st.job;
  auto& parts = st.router->parts();
  job.active = true;
  job.pushes = with_pushes;
  job.report = st.report;
  job.report.applied = with_pushes;
  job.pending = 0;
  job.then = nullptr;
  job.pulled.assign(parts.size(), {});
  job.pushing.resize(parts.size());
  job.push_outcome.assign(parts.size(), std::nullopt);
  std::vector<bulk_link*> links;
  std::vector<size_t> linked_parts;
  auto gen = st.generation;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto& part = parts[k];
    auto grads = !with_pushes ? std::vector<tensor>{}
                 : st.staging ? st.router->cut(part, st.staging->grads)
                              : st.router->cut(part, st.grads);
    if (auto* link = bulk_link_to(self, part.shard)) {
      if (with_pushes) {
        job.pushing[k] = std::move(grads);
        link->start_push(st.report.run, st.config.index, st.report.step, st.proof, part.names,
                         job.pushing[k]);
      } else {
        link->start_pull(st.report.run, part.names, std::move(link->values()));
      }
      links.push_back(link);
      linked_parts.push_back(k);
      continue;
    }
    auto& shard = st.links.shards[static_cast<size_t>(part.shard)];
    if (with_pushes) {
      ++job.pending;
      self
        ->request(shard, st.config.request_timeout, push_atom::value, st.report.run,
                  st.config.index, st.report.step, st.proof, part.names, std::move(grads))
        .then(
          [self, gen](int64_t) {
            if (self->state.generation == gen)
              job_reply(self);
          },
          [self, index = part.shard, gen](caf::error& err) {
            if (self->state.generation == gen
                && on_push_refused(self, index, err, self->state.job.report))
              job_reply(self);
          });
    }
    ++job.pending;
    self->request(shard, st.config.request_timeout, pull_atom::value, st.report.run, part.names)
      .then(
        [self, k, gen](pull_reply& reply) {
          if (self->state.generation != gen)
            return;
          self->state.job.pulled[k] = std::move(reply.values);
          job_reply(self);
        },
        [self, index = part.shard, gen](caf::error& err) {
          if (self->state.generation == gen)
            wait_for_recovery(self, "pull from ps:" + std::to_string(index) + " failed", err);
        });
  }
  // The gradients sent by the job before serve this step's successor.
  if (!st.staging)
    for (size_t v = 0; v < st.grads.size() && v < st.spare_grads.size(); ++v)
      if (st.grads[v].size() == 0)
        st.grads[v] = std::move(st.spare_grads[v]);
  if (links.empty())
    return;
  // Each link's push is followed by its pull as soon as it is answered.
  // Runs on the runner's thread, which owns the links and these fields
  // until wait().
  then_on_link then_pull;
  if (with_pushes)
    then_pull = [&job, &parts, links, linked_parts, run = st.report.run,
                 pulling = std::vector<bool>(links.size())](size_t i) mutable {
      if (pulling[i])
        return false;
      auto k = linked_parts[i];
      job.push_outcome[k] = links[i]->error();
      if (links[i]->broken())
        return false;
      links[i]->start_pull(run, parts[k].names, std::move(links[i]->values()));
      pulling[i] = true;
      return true;
    };
  st.runner->start(std::move(links), 2 * st.config.request_timeout, std::move(then_pull));
}

// Waits for J (a reply still due over BASP calls again), then counts and
// reports its pushed step and puts the values it pulled into the
// parameters. `then` runs unless the run had to recover.
void collect_job(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  auto& job = st.job;
  if (!job.active) {
    then();
    return;
  }
  if (job.pending > 0) {
    job.then = [self, then = std::move(then)]() mutable { collect_job(self, std::move(then)); };
    return;
  }
  if (st.runner)
    st.runner->wait();
  auto& parts = st.router->parts();
  for (size_t k = 0; k < parts.size(); ++k) {
    auto& part = parts[k];
    auto* link = bulk_link_to(self, part.shard);
    if (!link) {
      if (!take_pulled(self, part, job.pulled[k]))
        return;
      continue;
    }
    if (job.pushes) {
      return_gradients(self, part, job.pushing[k], st.spare_grads);
      if (auto& refused = job.push_outcome[k]) {
        auto err = link->broken() ? bulk_failure(st.bulk, part.shard) : make_error(*refused);
        if (!on_push_refused(self, part.shard, err, job.report))
          return; // a lost shard (a broken link among them): recovering
      }
    }
    if (link->error()) {
      wait_for_recovery(self, "pull from ps:" + std::to_string(part.shard) + " failed",
                        bulk_failure(st.bulk, part.shard));
      return;
    }
    if (!take_pulled_ahead(self, part, link->values()))
      return;
  }
  job.active = false;
  st.values_ready = true;
  if (job.pushes)
    count_and_report(self, job.report);
  then();
}

// Step s is computed (`pushable`: its gradients are finite): J(s-1) is
// collected, J(s) started, and the next step may begin.
void on_computed_ahead(self_ptr self, bool pushable) {
  collect_job(self, [self, pushable] {
    start_job(self, pushable);
    if (!pushable)
      report_nonfinite(self);
    step_over(self);
  });
}

} // namespace troupe::worker_steps
