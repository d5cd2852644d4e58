#include "actors/chief/chief.hpp"

#include <algorithm>
#include <cstdio>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/token_queue/token_queue.hpp"

namespace troupe {

std::string training_result::to_json() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"event\":\"final\",\"ok\":%s,\"mode\":\"%s\",\"global_step\":%lld,"
                "\"test_accuracy\":%.4f,\"test_loss\":%.4f,\"examples_per_sec\":%.1f,"
                "\"wall_seconds\":%.2f,\"examples\":%llu,\"refused_steps\":%lld,"
                "\"dropped_gradients\":%llu,\"ps_imbalance\":%.3f",
                ok ? "true" : "false", name_of(mode), static_cast<long long>(global_step),
                test_accuracy, test_loss, examples_per_sec, wall_seconds,
                static_cast<unsigned long long>(examples), static_cast<long long>(refused_steps),
                static_cast<unsigned long long>(dropped_gradients), ps_imbalance);
  std::string out = buf;
  if (!ok) {
    std::string escaped;
    for (char c : error) {
      if (c == '"' || c == '\\')
        escaped += '\\';
      escaped += (c == '\n') ? ' ' : c;
    }
    out += ",\"error\":\"" + escaped + "\"";
  }
  return out + "}";
}

std::string training_result::traffic_json() const {
  std::string out = "{\"event\":\"traffic\",\"ps_imbalance\":" + std::to_string(ps_imbalance)
                    + ",\"shards\":[";
  for (size_t i = 0; i < traffic.size(); ++i) {
    auto& t = traffic[i];
    out += std::string(i ? "," : "") + "{\"shard\":" + std::to_string(t.shard)
           + ",\"bytes_held\":" + std::to_string(t.bytes_held) + ",\"bytes_in\":"
           + std::to_string(t.bytes_in) + ",\"bytes_out\":" + std::to_string(t.bytes_out)
           + ",\"pulls\":" + std::to_string(t.pulls) + ",\"pushes\":" + std::to_string(t.pushes)
           + ",\"variables\":{";
    for (size_t v = 0; v < t.variables.size(); ++v)
      out += std::string(v ? "," : "") + "\"" + t.variables[v] + "\":{\"in\":"
             + std::to_string(t.variable_in[v]) + ",\"out\":" + std::to_string(t.variable_out[v])
             + "}";
    out += "}}";
  }
  return out + "]}";
}

namespace {

using self_ptr = chief_actor::stateful_pointer<chief_state>;
constexpr auto watchdog_period = std::chrono::seconds(1);

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

bool is_sync(self_ptr self) {
  return self->state.config.mode == update_mode::sync;
}

int64_t global_step(self_ptr self) {
  return is_sync(self) ? self->state.sync_step : self->state.budget->global_step();
}

// The token queue is linked, but a normal exit does not take linked actors
// down: end it explicitly whenever the chief quits.
void quit(self_ptr self, const caf::error& reason) {
  if (self->state.token_queue)
    self->send_exit(self->state.token_queue, caf::exit_reason::user_shutdown);
  self->quit(reason);
}

// A finished run stops every task with exit code 0; a failed one ends them
// with user_shutdown so that their processes exit 1 as well.
void stop_everyone(self_ptr self, bool failed) {
  auto& st = self->state;
  if (!failed) // after a failure, the exit message below ends them instead
    for (auto& kv : st.idle)
      kv.second.deliver(step_grant{0, true});
  st.idle.clear();
  auto stop = [&](const auto& handle) {
    if (failed)
      self->send_exit(handle, caf::exit_reason::user_shutdown);
    else
      self->send(handle, stop_atom::value);
  };
  if (st.token_queue && !failed)
    self->send(st.token_queue, stop_atom::value); // releases workers waiting for a token
  for (auto& shard : st.links.shards)
    stop(shard);
  for (auto& kv : st.workers)
    if (auto w = caf::actor_cast<worker_actor>(kv.second))
      stop(w);
}

// Quitting only once every shard has confirmed its stop (or after the next
// watchdog ticks) guarantees the stop messages left this process.
void stop_and_await_shards(self_ptr self, caf::error reason) {
  auto& st = self->state;
  st.exit_reason = std::move(reason);
  st.done = true;
  stop_everyone(self, static_cast<bool>(st.exit_reason));
  if (st.shards_down >= st.links.shards.size())
    quit(self, st.exit_reason);
}

training_result base_result(self_ptr self) {
  auto& st = self->state;
  training_result r;
  r.wall_seconds = seconds_since(st.created);
  r.mode = st.config.mode;
  r.global_step = global_step(self);
  r.examples = st.examples;
  r.refused_steps = st.refused;
  r.dropped_gradients = st.dropped;
  return r;
}

void abort_run(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.finishing)
    return;
  st.finishing = true;
  spdlog::error("chief: training failed: {}", why);
  auto r = base_result(self);
  r.ok = false;
  r.error = why;
  if (st.links.on_finish)
    st.links.on_finish(r);
  stop_and_await_shards(self, caf::make_error(caf::sec::runtime_error, why));
}

void report_and_stop(self_ptr self, training_result& r) {
  auto& st = self->state;
  if (st.links.on_finish)
    st.links.on_finish(r);
  stop_and_await_shards(self, r.ok ? caf::error{caf::exit_reason::normal}
                                   : caf::make_error(caf::sec::runtime_error, r.error));
}

// Asks every shard for its traffic, logs the per-shard table and imbalance,
// then reports the result. A shard that does not answer leaves its row out.
void collect_traffic_and_finish(self_ptr self, training_result r) {
  auto& st = self->state;
  auto result = std::make_shared<training_result>(std::move(r));
  auto pending = std::make_shared<size_t>(st.links.shards.size());
  auto done = [self, result, pending] {
    if (--*pending > 0)
      return;
    auto& t = result->traffic;
    std::sort(t.begin(), t.end(),
              [](const shard_traffic& a, const shard_traffic& b) { return a.shard < b.shard; });
    double total = 0, most = 0;
    for (auto& s : t) {
      auto io = static_cast<double>(s.bytes_in + s.bytes_out);
      total += io;
      most = std::max(most, io);
    }
    result->ps_imbalance = total > 0 && !t.empty() ? most / (total / t.size()) : 0;
    spdlog::info("chief: traffic per shard ({} shard(s)):", t.size());
    spdlog::info("chief:   shard  variables  MB held      MB in     MB out   share");
    for (auto& s : t)
      spdlog::info("chief:   ps:{:<3} {:>9} {:>8.2f} {:>10.1f} {:>10.1f} {:>6.1f}%", s.shard,
                   s.variables.size(), s.bytes_held / 1e6, s.bytes_in / 1e6, s.bytes_out / 1e6,
                   total > 0 ? 100.0 * static_cast<double>(s.bytes_in + s.bytes_out) / total : 0.0);
    spdlog::info("chief:   imbalance (max / mean of MB in + out): {:.3f}", result->ps_imbalance);
    report_and_stop(self, *result);
  };
  if (st.links.shards.empty()) {
    ++*pending;
    done();
    return;
  }
  for (auto& shard : st.links.shards)
    self->request(shard, st.config.runtime.request_timeout, stats_atom::value)
      .then([result, done](shard_traffic& t) {
              result->traffic.push_back(std::move(t));
              done();
            },
            [done](caf::error&) { done(); });
}

void evaluate_and_finish(self_ptr self, std::vector<tensor> params, double train_seconds) {
  auto& st = self->state;
  auto r = base_result(self);
  r.examples_per_sec = train_seconds > 0 ? static_cast<double>(st.examples) / train_seconds : 0;
  try {
    auto stats = evaluate_dataset(*st.links.net, params, *st.links.test);
    r.test_accuracy = stats.examples
                        ? static_cast<double>(stats.correct) / static_cast<double>(stats.examples)
                        : 0.0;
    r.test_loss = stats.loss;
    r.ok = true;
    for (auto& v : st.links.net->variables())
      r.variables.push_back(v.name);
    r.values = std::move(params);
  } catch (const std::exception& e) {
    r.error = std::string("evaluation failed: ") + e.what();
  }
  r.wall_seconds = seconds_since(st.created);
  spdlog::info("chief: done: global_step={} test_accuracy={:.4f} test_loss={:.4f} "
               "examples/s={:.0f}",
               r.global_step, r.test_accuracy, r.test_loss, r.examples_per_sec);
  collect_traffic_and_finish(self, std::move(r));
}

// Reads the final values of every variable from the shards, in model order.
void finish(self_ptr self) {
  auto& st = self->state;
  st.finishing = true;
  for (auto& kv : st.idle) // nothing left to wait for
    kv.second.deliver(step_grant{0, true});
  st.idle.clear();
  double train_seconds = seconds_since(st.started);
  spdlog::info("chief: reached last_step {}; evaluating on {} test examples",
               st.config.last_step, st.links.test->size());
  auto& vars = st.links.net->variables();
  auto params = std::make_shared<std::vector<tensor>>();
  for (auto& v : vars)
    params->emplace_back(v.shape);
  auto pending = std::make_shared<size_t>(st.links.shards.size());
  for (size_t s = 0; s < st.links.shards.size(); ++s) {
    std::vector<std::string> names;
    std::vector<size_t> indices;
    for (size_t i = 0; i < st.plan.variables.size(); ++i)
      if (st.plan.shard_of[i] == static_cast<int32_t>(s)) {
        names.push_back(st.plan.variables[i]);
        indices.push_back(i);
      }
    self->request(st.links.shards[s], st.config.runtime.request_timeout, pull_atom::value, names)
      .then(
        [self, params, pending, indices, train_seconds](pull_reply& reply) {
          auto& vars = self->state.links.net->variables();
          auto& plan = self->state.plan;
          for (size_t k = 0; k < indices.size() && k < reply.values.size(); ++k)
            gather_slice(plan_slice(plan, indices[k], vars), std::move(reply.values[k]),
                         (*params)[static_cast<size_t>(plan.variable_of[indices[k]])]);
          if (--*pending == 0)
            evaluate_and_finish(self, std::move(*params), train_seconds);
        },
        [self, s](caf::error& err) {
          self->state.finishing = false;
          abort_run(self, "reading the final values from ps:" + std::to_string(s)
                            + " failed: " + describe(err));
        });
  }
}

// Takes a worker's grant back and, if a worker is idle, hands the step to it.
void revoke(self_ptr self, int32_t worker) {
  auto& st = self->state;
  if (is_sync(self))
    return;
  st.budget->revoke(worker);
  if (st.idle.empty() || st.finishing)
    return;
  auto next = st.idle.begin();
  if (auto step = st.budget->grant(next->first)) {
    next->second.deliver(step_grant{*step, false});
    st.idle.erase(next);
  }
}

// A progress line every log_interval global steps, over the steps since the last.
void log_progress(self_ptr self) {
  auto& st = self->state;
  ++st.interval_steps;
  auto step = global_step(self);
  if (st.config.log_interval <= 0 || step % st.config.log_interval != 0)
    return;
  double secs = seconds_since(st.interval_start);
  auto steps = static_cast<double>(st.interval_steps);
  std::string sync_part;
  if (is_sync(self))
    sync_part = fmt::format(" straggler_ms={:.2f} dropped={} tokens={} replicas={}",
                            st.interval_straggler_ms / steps, st.interval_dropped,
                            st.interval_tokens, st.replicas);
  spdlog::info("chief: global_step={}/{} loss={:.4f} batch_accuracy={:.4f} examples/s={:.0f} "
               "workers={}{}",
               step, st.config.last_step, st.interval_loss / steps,
               st.interval_examples ? static_cast<double>(st.interval_correct)
                                        / static_cast<double>(st.interval_examples)
                                    : 0.0,
               secs > 0 ? static_cast<double>(st.interval_examples) / secs : 0.0,
               st.workers.size(), sync_part);
  st.interval_start = std::chrono::steady_clock::now();
  st.interval_examples = st.interval_correct = st.interval_dropped = st.interval_tokens = 0;
  st.interval_loss = st.interval_straggler_ms = 0;
  st.interval_steps = 0;
}

// Sync: the worker-loss policy. Only workers that joined and were lost count,
// so that workers still starting up never shrink R.
void apply_loss_policy(self_ptr self) {
  auto& st = self->state;
  auto configured = st.config.replicas_to_aggregate;
  auto available = st.config.num_workers - static_cast<int32_t>(st.lost.size());
  auto short_of_workers = available < configured;
  if (st.config.on_worker_loss == worker_loss_policy::wait) {
    if (short_of_workers && !st.short_since) {
      st.short_since = std::chrono::steady_clock::now();
      spdlog::warn("chief: {} of {} needed workers available; holding step {} until a lost "
                   "worker restarts (on-worker-loss = wait, at most {} ms)",
                   available, configured, st.sync_step,
                   st.config.runtime.worker_wait_timeout.count());
    } else if (!short_of_workers && st.short_since) {
      st.short_since.reset();
      spdlog::info("chief: enough workers again; step {} goes on", st.sync_step);
    }
    return;
  }
  auto wanted = std::max(1, std::min(configured, available));
  if (wanted == st.replicas)
    return;
  spdlog::warn("chief: averaging {} gradient(s) per step from now on (was {}; {} worker(s) "
               "lost, on-worker-loss = shrink)",
               wanted, st.replicas, st.lost.size());
  st.replicas = wanted;
  for (auto& shard : st.links.shards)
    self->send(shard, replicas_atom::value, wanted);
}

void initialize_shards(self_ptr self) {
  auto& st = self->state;
  auto& vars = st.links.net->variables();
  auto num_shards = static_cast<int32_t>(st.links.shards.size());
  auto placement = plan_placement(st.config.placement, vars, num_shards,
                                  st.config.placement_epsilon, st.config.partitioners);
  std::set<int32_t> holding;
  for (auto& p : placement)
    holding.insert(p.shard);
  shard_options options;
  st.plan.coordinator = caf::actor_cast<step_coordinator_actor>(self);
  if (is_sync(self)) {
    token_queue_config queue{static_cast<int32_t>(holding.size()), st.config.last_step};
    st.token_queue = self->spawn<caf::linked>(token_queue, queue,
                                              caf::actor_cast<chief_actor>(self));
    st.plan.coordinator = st.token_queue;
    st.replicas = st.config.replicas_to_aggregate;
    options = shard_options{true, st.replicas, st.config.last_step, st.token_queue};
    spdlog::info("chief: sync mode: averaging {} of {} workers' gradients per step", st.replicas,
                 st.config.num_workers);
  }
  std::vector<std::vector<std::string>> names(num_shards);
  std::vector<std::vector<tensor>> values(num_shards);
  std::vector<tensor> full;  // each variable's first value, computed once
  for (auto& v : vars)
    full.push_back(initial_value(v, st.config.seed));
  for (auto& p : placement) {
    auto var = std::find_if(vars.begin(), vars.end(),
                            [&](const variable_spec& v) { return v.name == p.slice.variable; })
               - vars.begin();
    st.plan.variables.push_back(p.slice.name);
    st.plan.shard_of.push_back(p.shard);
    st.plan.variable_of.push_back(static_cast<int32_t>(var));
    st.plan.axis_of.push_back(p.slice.axis);
    st.plan.offset_of.push_back(p.slice.offset);
    st.plan.rows_of.push_back(p.slice.shape.empty()
                                ? 1
                                : p.slice.shape[static_cast<size_t>(p.slice.axis)]);
    names[p.shard].push_back(p.slice.name);
    values[p.shard].push_back(p.slice.shape == vars[var].shape ? full[var]
                                                               : extract_slice(p.slice, full[var]));
    spdlog::info("chief: {} {} -> ps:{}", p.slice.name, to_string(p.slice.shape), p.shard);
  }
  spdlog::info("chief: placement {}: imbalance of bytes held {:.3f}", name_of(st.config.placement),
               imbalance(placement, num_shards));
  auto pending = std::make_shared<size_t>(st.links.shards.size());
  for (int32_t s = 0; s < num_shards; ++s)
    self->request(st.links.shards[s], st.config.runtime.request_timeout, init_atom::value,
                  std::move(names[s]), std::move(values[s]), options)
      .then(
        [self, pending](caf::ok_atom) {
          if (--*pending > 0)
            return;
          auto& st = self->state;
          st.initialized = true;
          if (is_sync(self)) // sync steps start now; async ones at the first grant
            st.started = st.interval_start = std::chrono::steady_clock::now();
          spdlog::info("chief: initialised {} variable(s) on {} shard(s); {} worker(s) waiting",
                       st.plan.variables.size(), st.links.shards.size(),
                       st.waiting_ready.size());
          for (auto& rp : st.waiting_ready)
            rp.deliver(st.plan);
          st.waiting_ready.clear();
        },
        [self, s](caf::error& err) {
          abort_run(self, "initialising ps:" + std::to_string(s) + " failed: " + describe(err));
        });
}

} // namespace

chief_actor::behavior_type chief(chief_actor::stateful_pointer<chief_state> self,
                                 chief_config config, chief_links links) {
  auto& st = self->state;
  st.config = config;
  st.links = std::move(links);
  st.budget.emplace(config.last_step);
  st.created = st.started = st.interval_start = st.last_worker_seen
    = std::chrono::steady_clock::now();
  for (auto& shard : st.links.shards)
    self->monitor(shard);
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    for (size_t s = 0; s < st.links.shards.size(); ++s)
      if (msg.source == st.links.shards[s].address()) {
        ++st.shards_down;
        if (st.done) {
          if (st.shards_down == st.links.shards.size())
            quit(self, st.exit_reason);
          return;
        }
        if (!st.finishing)
          abort_run(self, "lost ps:" + std::to_string(s) + " (" + self->system().render(msg.reason)
                            + "); its variables are gone");
        return;
      }
    for (auto i = st.workers.begin(); i != st.workers.end(); ++i)
      if (i->second == msg.source) {
        auto index = i->first;
        st.workers.erase(i);
        st.last_worker_seen = std::chrono::steady_clock::now();
        st.idle.erase(index);
        if (is_sync(self) && !st.finishing && !st.done) {
          st.lost.insert(index);
          spdlog::warn("chief: lost worker:{} ({}); {} worker(s) left; a restarted worker "
                       "rejoins",
                       index, self->system().render(msg.reason), st.workers.size());
          apply_loss_policy(self);
          return;
        }
        if (!msg.reason || msg.reason == caf::exit_reason::normal) {
          revoke(self, index);
          spdlog::info("chief: worker:{} finished", index);
        } else if (!st.finishing) {
          spdlog::warn("chief: lost worker:{} ({}); its step goes to the others, {} worker(s) "
                       "left; a restarted worker rejoins",
                       index, self->system().render(msg.reason), st.workers.size());
          revoke(self, index);
        }
        return;
      }
  });
  try {
    initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, e.what());
  }
  self->delayed_send(self, watchdog_period, tick_atom::value);
  return {
    [self](hello_atom, uint32_t version, const std::string& job,
           int32_t task) -> caf::result<uint32_t> {
      return answer_hello(version, job, task, "chief");
    },
    [self](ready_atom, int32_t index) -> caf::result<training_plan> {
      auto& st = self->state;
      auto sender = self->current_sender();
      if (st.workers.count(index) > 0)
        spdlog::warn("chief: worker:{} registered again (restarted?)", index);
      if (auto w = caf::actor_cast<caf::actor>(sender)) {
        st.workers[index] = w.address();
        self->monitor(w);
      }
      if (is_sync(self) && st.lost.erase(index) > 0) {
        spdlog::info("chief: worker:{} rejoined at step {}", index, st.sync_step);
        apply_loss_policy(self);
      }
      if (st.initialized)
        return st.plan;
      auto rp = self->make_response_promise<training_plan>();
      st.waiting_ready.push_back(rp);
      return rp;
    },
    [self](report_atom, const step_report& r) -> caf::result<step_grant> {
      auto& st = self->state;
      if (is_sync(self)) {
        // In sync mode only a worker with a non-finite gradient reports here.
        if (r.step < 0 || r.applied)
          return make_error({errc::invalid_request,
                             "sync mode: workers report to the token queue, not the chief"});
        ++st.refused;
        abort_run(self, "worker:" + std::to_string(r.worker) + " computed a non-finite gradient "
                          "at step " + std::to_string(r.step) + "; a sync step cannot complete "
                          "without it: training diverged; lower train.learning-rate");
        return step_grant{0, true};
      }
      if (st.finishing)
        return step_grant{0, true};
      if (r.step >= 0 && st.budget->has_grant(r.worker)) {
        if (r.applied) {
          st.budget->complete(r.worker);
          st.examples += r.examples;
          st.interval_examples += r.examples;
          st.interval_correct += r.correct;
          st.interval_loss += r.loss;
          log_progress(self);
        } else {
          revoke(self, r.worker);
          if (++st.refused > st.config.runtime.max_refused_steps) {
            abort_run(self, std::to_string(st.refused)
                              + " updates not applied (non-finite gradients): training "
                                "diverged; lower train.learning-rate");
            return step_grant{0, true};
          }
        }
      }
      if (st.budget->finished()) {
        finish(self);
        return step_grant{0, true};
      }
      auto step = st.budget->grant(r.worker);
      if (!step) {
        // Every remaining step is held by another worker; one may yet be
        // revoked, so this worker waits instead of leaving.
        auto rp = self->make_response_promise<step_grant>();
        st.idle[r.worker] = rp;
        return rp;
      }
      if (!st.any_grant) {
        st.any_grant = true;
        st.started = st.interval_start = std::chrono::steady_clock::now();
      }
      return step_grant{*step, false};
    },
    [self](step_done_atom, const step_summary& s) {
      auto& st = self->state;
      if (st.finishing)
        return;
      st.sync_step = s.step;
      st.examples += s.examples;
      st.dropped += s.dropped;
      st.interval_examples += s.examples;
      st.interval_correct += s.correct;
      st.interval_loss += s.loss;
      st.interval_straggler_ms += s.straggler_ms;
      st.interval_dropped += s.dropped;
      st.interval_tokens += s.tokens;
      log_progress(self);
      if (s.step >= st.config.last_step)
        finish(self);
    },
    [self](tick_atom) {
      auto& st = self->state;
      if (st.done) {
        quit(self, st.exit_reason); // a shard that never confirmed: stop waiting
        return;
      }
      if (st.finishing) {
        self->delayed_send(self, watchdog_period, tick_atom::value);
        return;
      }
      if (st.short_since
          && std::chrono::steady_clock::now() - *st.short_since
               > st.config.runtime.worker_wait_timeout) {
        abort_run(self, "fewer than " + std::to_string(st.config.replicas_to_aggregate)
                          + " workers for "
                          + std::to_string(st.config.runtime.worker_wait_timeout.count())
                          + " ms (on-worker-loss = wait, cluster.worker-wait-timeout); restart "
                            "the lost workers, or use on-worker-loss = \"shrink\"");
      } else if (!st.workers.empty())
        st.last_worker_seen = std::chrono::steady_clock::now();
      else if (std::chrono::steady_clock::now() - st.last_worker_seen
               > st.config.runtime.worker_wait_timeout) {
        abort_run(self, "no worker has been connected for "
                          + std::to_string(st.config.runtime.worker_wait_timeout.count())
                          + " ms (cluster.worker-wait-timeout); start the workers or check "
                            "their logs");
      }
      self->delayed_send(self, watchdog_period, tick_atom::value);
    },
  };
}

} // namespace troupe
