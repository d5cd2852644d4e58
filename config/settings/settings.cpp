#include "config/settings/settings.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The model: a network that builds (a custom layer list, the shapes chain)
// and partitioner rules that fit its variables. Its name was parsed with the
// other enums' (config/node).
void check_model(const training_settings& t, std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  if (!(t.network.vgg_width > 0 && t.network.vgg_width <= 4)) {
    fail("model.vgg-width must be in (0, 4] (1 = the paper's widths)");
    return;
  }
  // A ps task reads no data: where [model] does not give the shape, the
  // chief's and workers' checks against the data are the ones that count.
  if (t.network.input.empty() || t.network.classes == 0 || t.model == model_kind::declared)
    return;
  try {
    auto net = make_model(t.model, model_options_of(t));
    try {
      check_partition_rules(t.partitioners, net->variables());
    } catch (const std::exception& e) {
      fail(std::string("train.partitioners: ") + e.what());
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

void check_workers(const training_settings& t, const cluster_shape& shape,
                   std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  auto workers = std::to_string(shape.workers);
  if (shape.ps < 1)
    fail("cluster.ps is empty: list at least one PS task, e.g. ps = [\"127.0.0.1:7001\"]");
  if (shape.workers < 1)
    fail("cluster.worker is empty: list at least one worker task, e.g. "
         "worker = [\"127.0.0.1:7101\"]");
  if (t.total_num_replicas != 0 && t.total_num_replicas != shape.workers)
    fail("train.total-num-replicas = " + std::to_string(t.total_num_replicas)
         + " but cluster.worker lists " + workers
         + " worker(s); N is the number of worker tasks (leave it 0)");
  if (t.replicas_to_aggregate < 0 || t.replicas_to_aggregate > shape.workers)
    fail("train.replicas-to-aggregate = " + std::to_string(t.replicas_to_aggregate)
         + " must be between 1 and the " + workers
         + " worker(s) (0: all of them); more gradients than workers per update is not "
           "supported");
  auto batch_range = "1.." + std::to_string(limits::max_batch_size);
  if (t.batch_size < 1 || t.batch_size > limits::max_batch_size)
    fail("train.batch-size = " + std::to_string(t.batch_size) + " is out of range; use "
         + batch_range);
  for (size_t i = 0; i < t.worker_batch_sizes.size(); ++i)
    if (t.worker_batch_sizes[i] < 1 || t.worker_batch_sizes[i] > limits::max_batch_size)
      fail("train.worker-batch-sizes[" + std::to_string(i) + "] = "
           + std::to_string(t.worker_batch_sizes[i]) + " is out of range; use " + batch_range);
  if (t.worker_batch_sizes.size() > static_cast<size_t>(std::max(shape.workers, 0)))
    fail("train.worker-batch-sizes lists " + std::to_string(t.worker_batch_sizes.size())
         + " sizes for " + workers + " worker(s)");
  if (t.worker_devices.size() > static_cast<size_t>(std::max(shape.workers, 0)))
    fail("train.worker-devices lists " + std::to_string(t.worker_devices.size()) + " devices for "
         + workers + " worker(s)");
  if (!(t.gpu_memory_fraction > 0 && t.gpu_memory_fraction <= 1))
    fail("train.gpu-memory-fraction must be in (0, 1]");
}

// The update rule the shards apply and how a worker takes part in it.
void check_update_rule(const training_settings& t, std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  if (auto err = t.optimizer.check())
    fail("train.optimizer / train.learning-rate / train.lr-*: " + err->message);
  if (!(t.placement_epsilon > 0 && t.placement_epsilon <= 1))
    fail("train.placement-epsilon must be in (0, 1]");
  if (!(t.clip_norm >= 0) || !std::isfinite(t.clip_norm))
    fail("train.clip-norm must be 0 (off) or a positive number");
  if (t.mode == update_mode::ssp && (t.staleness < 0 || t.staleness > limits::max_staleness))
    fail("train.staleness = " + std::to_string(t.staleness) + " is outside 0.."
         + std::to_string(limits::max_staleness)
         + " (steps a worker may run ahead of the "
           "slowest in ssp mode)");
  if (!wire_precision_of(static_cast<int32_t>(t.wire_precision)))
    fail("train.wire-precision must be one of " + name_list<wire_precision>());
  if (!(t.push_topk >= 0 && t.push_topk <= 1))
    fail("train.push-topk must be 0 (off) or the fraction of each gradient a push sends, in "
         "(0, 1]");
  if (t.report_every < 1 || t.report_every > limits::max_report_every)
    fail("train.report-every = " + std::to_string(t.report_every) + " is outside 1.."
         + std::to_string(limits::max_report_every) + " (steps a worker reports at a time)");
  else if (t.report_every > 1 && t.mode != update_mode::async)
    fail("train.report-every works in async mode only (sync and ssp steps wait on each "
         "report); set train.report-every = 1, or train.mode = \"async\"");
  if (t.pull_ahead && t.mode == update_mode::sync)
    fail("train.pull-ahead works in async mode only (a sync step must start from the update "
         "before it); set train.pull-ahead = false, or train.mode = \"async\"");
}

// The run's length and the intervals of its logs and evaluations.
void check_steps(const training_settings& t, std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  auto steps = std::to_string(limits::max_steps);
  if (t.last_step < 0 || t.last_step > limits::max_steps)
    fail("train.last-step = " + std::to_string(t.last_step) + " is out of range; use 1.." + steps
         + ", or 0 to train until stopped");
  if (!(t.epochs >= 0 && t.epochs <= limits::max_epochs))
    fail("train.epochs must be 0 (use last-step) or a number of passes up to 1e6");
  if (t.log_interval < 0 || t.log_interval > limits::max_steps)
    fail("train.log-interval must be 0 (off) or up to " + steps);
  if (t.eval_interval < 0 || t.eval_interval > limits::max_steps)
    fail("train.eval-interval must be 0 (off) or up to " + steps);
}

void check_checkpoints(const checkpoint_settings& ckpt, std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  if (ckpt.keep < 1 || ckpt.keep > limits::max_checkpoints_kept)
    fail("checkpoint.keep = " + std::to_string(ckpt.keep) + " is out of range; use 1.."
         + std::to_string(limits::max_checkpoints_kept));
  if (ckpt.save_steps < 0 || ckpt.save_steps > limits::max_steps)
    fail("checkpoint.save-steps must be 0 (off) or up to " + std::to_string(limits::max_steps));
  if (ckpt.save_interval.count() != 0
      && (ckpt.save_interval < limits::min_save_interval
          || ckpt.save_interval > limits::max_timeout))
    fail("checkpoint.save-interval = " + std::to_string(ckpt.save_interval.count())
         + "ms is out of range; use 0 (off) or 1s to 24h, e.g. 600s");
  if (ckpt.log_dir.size() > 4096)
    fail("checkpoint.log-dir is longer than 4096 characters");
  if (ckpt.delta_interval.count() != 0
      && (ckpt.delta_interval < limits::min_save_interval
          || ckpt.delta_interval > limits::max_timeout))
    fail("export.delta-interval = " + std::to_string(ckpt.delta_interval.count())
         + "ms is out of range; use 0 (off) or 1s to 24h, e.g. 30s");
  if (ckpt.delta_interval.count() > 0 && ckpt.log_dir.empty())
    fail("export.delta-interval needs checkpoint.log-dir: deltas are made from the checkpoints; "
         "set checkpoint.log-dir, or export.delta-interval = 0");
  if (ckpt.base_every < 1 || ckpt.base_every > 1'000'000)
    fail("export.base-every = " + std::to_string(ckpt.base_every)
         + " is out of range; use 1..1000000 (deltas between full bases)");
}

// The [data] options, and the task against the workers' devices.
void check_data(const training_settings& t, const cluster_shape& shape, std::vector<failure>& out) {
  for (auto& problem : data_option_problems(t.data))
    out.push_back({errc::invalid_setting, problem});
  if (t.data.task == objective::regression)
    for (int32_t w = 0; w < shape.workers; ++w)
      if (device_of(t, w).type != gpu::device_spec::kind::cpu) {
        out.push_back({errc::invalid_setting,
                       "data.task = regression trains on CPU workers only (mean squared error "
                       "has no GPU kernel yet); set train.device / train.worker-devices to cpu"});
        break;
      }
}

// The refusals allowed and the cluster's timeouts.
void check_runtime(const runtime_settings& runtime, std::vector<failure>& out) {
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  if (runtime.max_refused_steps < 0 || runtime.max_refused_steps > limits::max_steps)
    fail("train.max-refused-steps must be 0.." + std::to_string(limits::max_steps));
  if (runtime.max_workers < 0 || runtime.max_workers > limits::max_workers)
    fail("cluster.max-workers = " + std::to_string(runtime.max_workers)
         + " is out of range; use 0 "
           "(only the listed workers) or at least the listed workers, at most "
         + std::to_string(limits::max_workers));
  using std::chrono::milliseconds;
  struct duration_key {
    const char* name;
    milliseconds value;
    milliseconds min;
  };
  for (auto [name, value, min] :
       {duration_key{"cluster.connect-timeout", runtime.connect_timeout,
                     limits::min_connect_timeout},
        duration_key{"cluster.request-timeout", runtime.request_timeout,
                     limits::min_request_timeout},
        duration_key{"cluster.worker-wait-timeout", runtime.worker_wait_timeout,
                     limits::min_worker_wait_timeout},
        duration_key{"cluster.step-lease-timeout", runtime.step_lease_timeout,
                     limits::min_step_lease_timeout},
        duration_key{"cluster.recovery-timeout", runtime.recovery_timeout,
                     limits::min_recovery_timeout}})
    if (value < min || value > limits::max_timeout)
      fail(std::string(name) + " = " + std::to_string(value.count()) + "ms is out of range; use "
           + std::to_string(min.count()) + "ms to 24h, e.g. 30s");
}

// A model its workers' programs declare: they bring the batches and
// evaluate it, and its tables take the [embedding] section's rules.
void check_declared(const training_settings& t, const cluster_shape& shape,
                    std::vector<failure>& out) {
  if (t.model != model_kind::declared)
    return;
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  for (auto& p : embedding_problems(t.embedding))
    out.push_back(p);
  if (t.epochs > 0)
    fail("train.epochs needs the data's size, which a declared model's program keeps to itself; "
         "set train.last-step instead");
  if (t.eval_interval > 0)
    fail("train.eval-interval: the chief cannot run a declared model; evaluate it in the "
         "program and report it (w.report), and set train.eval-interval = 0");
  for (int32_t w = 0; w < shape.workers; ++w)
    if (device_of(t, w).type != gpu::device_spec::kind::cpu) {
      fail("train.device: a declared model computes where its program puts its module (e.g. "
           "module.to(\"cuda\")); leave train.device = \"cpu\"");
      break;
    }
}

// The embedding models: the [embedding] section, and what they cannot do yet.
void check_embeddings(const training_settings& t, const cluster_shape& shape,
                      std::vector<failure>& out) {
  if (!uses_embeddings(t.model, t.network.layers))
    return;
  auto fail = [&](std::string why) { out.push_back({errc::invalid_setting, std::move(why)}); };
  for (auto& p : embedding_problems(t.embedding))
    out.push_back(p);
  auto model = std::string(name_of(t.model));
  if (t.push_topk > 0)
    fail("train.push-topk applies to dense models; model " + model
         + " pushes its rows whole (set train.push-topk = 0)");
  if (t.wire_precision != wire_precision::fp32)
    fail("train.wire-precision = \"" + std::string(name_of(t.wire_precision))
         + "\" applies to dense models; model " + model
         + " moves its rows at fp32 (set train.wire-precision = \"fp32\")");
  if (t.pull_ahead)
    fail("train.pull-ahead does not apply to model " + model
         + " (a step's rows are pulled once its batch is read); set it to false");
  for (int32_t w = 0; w < shape.workers; ++w)
    if (device_of(t, w).type != gpu::device_spec::kind::cpu) {
      fail("model " + model
           + " trains on CPU workers (its lookups have no GPU kernel yet); set "
             "train.device / train.worker-devices to cpu");
      break;
    }
}

} // namespace

std::vector<failure> check_settings(const training_settings& t, const runtime_settings& runtime,
                                    const cluster_shape& shape) {
  std::vector<failure> out;
  check_model(t, out);
  check_workers(t, shape, out);
  check_update_rule(t, out);
  check_checkpoints(t.checkpoint, out);
  check_steps(t, out);
  check_data(t, shape, out);
  check_embeddings(t, shape, out);
  check_declared(t, shape, out);
  check_runtime(runtime, out);
  if (runtime.max_workers > 0 && runtime.max_workers < shape.workers)
    out.push_back(
      {errc::invalid_setting, "cluster.max-workers = " + std::to_string(runtime.max_workers)
                                + " is below the " + std::to_string(shape.workers)
                                + " listed worker(s); use 0 (only those) or at least "
                                + std::to_string(shape.workers)});
  return out;
}

void require_valid_settings(const training_settings& train, const runtime_settings& runtime,
                            const cluster_shape& shape) {
  auto problems = check_settings(train, runtime, shape);
  if (problems.empty())
    return;
  std::string text = "invalid settings:";
  for (auto& p : problems)
    text += "\n  " + p.message;
  throw troupe_error(text);
}

int32_t replicas_of(const training_settings& train, const cluster_shape& shape) {
  return static_cast<int32_t>(train.replicas_to_aggregate > 0 ? train.replicas_to_aggregate
                                                              : shape.workers);
}

int64_t last_step_for_epochs(const training_settings& train, const cluster_shape& shape,
                             uint64_t examples) {
  // With per-worker batch sizes, an update averages over the workers' sizes.
  double mean_batch = 0;
  for (int32_t w = 0; w < shape.workers; ++w)
    mean_batch += static_cast<double>(batch_size_of(train, w));
  mean_batch = shape.workers > 0 ? mean_batch / shape.workers
                                 : static_cast<double>(train.batch_size);
  auto per_update = mean_batch
                    * (train.mode == update_mode::sync
                         ? static_cast<double>(replicas_of(train, shape))
                         : 1.0);
  double steps = std::ceil(train.epochs * static_cast<double>(examples) / per_update);
  if (!(steps <= static_cast<double>(limits::max_steps)))
    throw troupe_error("train.epochs = " + std::to_string(train.epochs) + " over "
                       + std::to_string(examples) + " examples is more than "
                       + std::to_string(limits::max_steps) + " steps; lower it");
  return std::max<int64_t>(1, static_cast<int64_t>(steps));
}

gpu::device_spec device_of(const training_settings& s, int32_t worker) {
  auto i = static_cast<size_t>(worker);
  return i < s.worker_devices.size() ? s.worker_devices[i] : s.device;
}

int64_t batch_size_of(const training_settings& s, int32_t worker) {
  auto i = static_cast<size_t>(worker);
  return i < s.worker_batch_sizes.size() ? s.worker_batch_sizes[i] : s.batch_size;
}

model_options model_options_of(const training_settings& s) {
  auto options = s.network;
  options.seed = s.seed;
  options.task = s.data.task;
  options.embedding_dim = s.embedding.dim;
  options.deep_layers = s.embedding.deep_layers;
  if (s.embedding.kind == table_kind::fixed) {
    options.vocabulary = s.embedding.vocabulary;
    options.ids = s.embedding.ids;
  }
  return options;
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, word.size() / 3) + 1;
  for (auto& c : candidates) {
    auto d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

} // namespace troupe
