#include "config/node/node_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <caf/config_option.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/config_value.hpp>
#include <caf/io/middleman.hpp>
#include <caf/settings.hpp>

#include "tensor/plan/placement.hpp"
#include "gpu/backend.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/nn/model.hpp"

namespace troupe {

namespace {

std::string str(caf::string_view v) {
  return std::string(v.data(), v.size());
}

constexpr const char* default_config_file = "caf-application.conf";

// The sections --help lists; CAF's own keys are documented in docs/config.md.
const std::set<std::string> troupe_categories{"cluster", "train", "model"};

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::chrono::milliseconds to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t);
}

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

std::string type_hint(const caf::config_option& opt) {
  auto t = str(opt.type_name());
  if (opt.category() == "cluster" && t.find("list") != std::string::npos)
    return "a list of \"host:port\" strings, e.g. [\"127.0.0.1:7001\"]";
  if (t.find("list") != std::string::npos)
    return "a list (" + t + "), e.g. [1000, 2000], [0.1, 0.01, 0.001] or [\"relu\"]; write "
           "every real with a decimal point";
  if (t == "timespan")
    return "a duration with a unit, e.g. 30s or 500ms";
  if (t == "string")
    return "a string in double quotes";
  if (t.find("int") != std::string::npos)
    return "an integer";
  if (t == "real64" || t == "real32" || t == "real")
    return "a number";
  if (t == "boolean")
    return "true or false";
  return t;
}

std::vector<std::string> known_names(const node_config& cfg) {
  std::vector<std::string> out;
  for (auto& opt : cfg.options())
    out.push_back(str(opt.full_name()));
  return out;
}

// Reads the file with no Troupe options declared, so that every value stays
// in the raw settings with the type it was written with; CAF's own typed
// binding would drop wrongly typed values without a word.
void check_file_keys(const node_config& cfg, const std::string& path, std::istream& in,
                     std::vector<std::string>& errors) {
  caf::actor_system_config raw;
  if (auto err = raw.parse(caf::actor_system_config::string_list{}, in)) {
    errors.push_back(path + ": syntax error: " + caf::to_string(err)
                     + " (INI syntax: [section], key = value, strings in double quotes, "
                       "comments start with ';')");
    return;
  }
  auto names = known_names(cfg);
  for (auto& [category, value] : caf::content(raw)) {
    auto* section = caf::get_if<caf::settings>(&value);
    if (!section) {
      // A top-level key outside any [section].
      auto opt = cfg.options().qualified_name_lookup("global", category);
      if (!opt)
        errors.push_back(path + ": unknown key '" + category + "' outside any section");
      continue;
    }
    for (auto& [key, val] : *section) {
      auto opt = cfg.options().qualified_name_lookup(category, key);
      std::string full = category + "." + key;
      if (!opt) {
        auto suggestion = closest_match(full, names);
        errors.push_back(path + ": unknown key '" + full + "'"
                         + (suggestion.empty() ? " (see troupe-node --help for every key)"
                                               : "; did you mean '" + suggestion + "'?"));
        continue;
      }
      if (opt->check(val)) {
        // An integer where a real is expected is fine (learning-rate = 1).
        if (caf::holds_alternative<caf::config_value::integer>(val)
            && !opt->check(caf::config_value{
                 static_cast<double>(caf::get<caf::config_value::integer>(val))}))
          continue;
        errors.push_back(path + ": " + full + " = " + caf::to_string(val) + " has the wrong type; "
                         + "expected " + type_hint(*opt));
      }
    }
  }
}

// CAF binds only exactly typed values; store the integer-for-real case.
void coerce_reals(node_config& cfg, const std::string& path, const std::vector<std::string>& cli) {
  std::ifstream in(path);
  caf::actor_system_config raw;
  if (raw.parse(caf::actor_system_config::string_list{}, in))
    return;
  for (auto& [category, value] : caf::content(raw)) {
    auto* section = caf::get_if<caf::settings>(&value);
    if (!section)
      continue;
    for (auto& [key, val] : *section) {
      auto opt = cfg.options().qualified_name_lookup(category, key);
      if (!opt || !caf::holds_alternative<caf::config_value::integer>(val))
        continue;
      caf::config_value as_real{static_cast<double>(caf::get<caf::config_value::integer>(val))};
      auto flag = "--" + category + "." + key + "=";
      bool on_cli = std::any_of(cli.begin(), cli.end(), [&](const std::string& arg) {
        return arg.rfind(flag, 0) == 0;
      });
      if (!on_cli && opt->check(val) && !opt->check(as_real))
        opt->store(as_real);
    }
  }
}

void check_hosts(const char* job, const std::vector<std::string>& entries,
                 std::vector<host_port>& out, std::set<std::string>& seen,
                 std::vector<std::string>& errors) {
  for (auto& entry : entries) {
    host_port hp;
    auto err = parse_host_port(entry, hp);
    if (!err.empty()) {
      errors.push_back(std::string("cluster.") + job + ": " + err);
      continue;
    }
    if (!seen.insert(hp.to_string()).second)
      errors.push_back(std::string("cluster.") + job + ": address " + hp.to_string()
                       + " is used by two tasks; give every task its own host:port");
    out.push_back(hp);
  }
}

void validate(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  std::set<std::string> seen;
  check_hosts("chief", cfg.chief_hosts, setup.cluster.chief, seen, errors);
  check_hosts("ps", cfg.ps_hosts, setup.cluster.ps, seen, errors);
  check_hosts("worker", cfg.worker_hosts, setup.cluster.worker, seen, errors);
  if (cfg.ps_hosts.empty())
    errors.push_back("cluster.ps is empty: list at least one PS task, e.g. ps = [\"127.0.0.1:7001\"]");
  if (cfg.worker_hosts.empty())
    errors.push_back("cluster.worker is empty: list at least one worker task, e.g. "
                     "worker = [\"127.0.0.1:7101\"]");
  if (cfg.chief_hosts.size() != 1)
    errors.push_back("cluster.chief must list exactly one task (it has "
                     + std::to_string(cfg.chief_hosts.size()) + "), e.g. chief = [\"127.0.0.1:7000\"]");

  setup.job = cfg.job_name;
  setup.task = cfg.task_index;
  if (!setup.whole_cluster) {
    std::map<std::string, size_t> sizes{{"chief", cfg.chief_hosts.size()},
                                        {"ps", cfg.ps_hosts.size()},
                                        {"worker", cfg.worker_hosts.size()}};
    auto job = sizes.find(cfg.job_name);
    if (job == sizes.end())
      errors.push_back("--job_name=" + cfg.job_name + " is not a job; use ps, worker or chief");
    else if (cfg.task_index < 0 || static_cast<size_t>(cfg.task_index) >= job->second)
      errors.push_back("--task_index=" + std::to_string(cfg.task_index) + " is out of range: job "
                       + cfg.job_name + " has " + std::to_string(job->second)
                       + " task(s) in cluster." + cfg.job_name + " (valid: 0.."
                       + std::to_string(static_cast<int64_t>(job->second) - 1) + ")");
  }

  auto& t = cfg.train;
  setup.train = t;
  setup.train.seed = static_cast<uint64_t>(cfg.seed);
  auto& models = model_names();
  if (std::find(models.begin(), models.end(), t.model) == models.end()) {
    auto suggestion = closest_match(t.model, models);
    errors.push_back("train.model = \"" + t.model + "\" is not a known model"
                     + (suggestion.empty() ? std::string()
                                           : "; did you mean \"" + suggestion + "\"?")
                     + " (known: " + join(models) + ")");
  } else {
    // Building the network checks a custom layer list and the shapes chain.
    try {
      auto net = make_model(t.model, model_options_of(setup.train));
      try {
        check_partition_rules(parse_partition_rules(t.partitioners), net->variables());
      } catch (const std::exception& e) {
        errors.push_back(std::string("train.partitioners: ") + e.what());
      }
    } catch (const std::exception& e) {
      errors.push_back(e.what());
    }
  }
  if (t.mode != "async" && t.mode != "sync")
    errors.push_back("train.mode = \"" + t.mode + "\" is not a mode; use \"async\" or \"sync\"");
  auto workers = static_cast<int64_t>(cfg.worker_hosts.size());
  setup.train.replicas_to_aggregate = cfg.replicas_to_aggregate > 0 ? cfg.replicas_to_aggregate
                                                                    : workers;
  setup.train.total_num_replicas = workers;
  if (cfg.total_num_replicas != 0 && cfg.total_num_replicas != workers)
    errors.push_back("train.total-num-replicas = " + std::to_string(cfg.total_num_replicas)
                     + " but cluster.worker lists " + std::to_string(workers)
                     + " worker(s); N is the number of worker tasks (leave it 0)");
  if (cfg.replicas_to_aggregate < 0 || cfg.replicas_to_aggregate > workers)
    errors.push_back("train.replicas-to-aggregate = " + std::to_string(cfg.replicas_to_aggregate)
                     + " must be between 1 and the " + std::to_string(workers)
                     + " worker(s) (0: all of them); more gradients than workers per update "
                       "is not supported");
  if (t.on_worker_loss != "shrink" && t.on_worker_loss != "wait")
    errors.push_back("train.on-worker-loss = \"" + t.on_worker_loss
                     + "\" is not a policy; use \"shrink\" or \"wait\"");
  if (t.batch_size < 1)
    errors.push_back("train.batch-size must be at least 1 (it is " + std::to_string(t.batch_size) + ")");
  static const std::map<std::string, lr_schedule::kind> schedules{
    {"constant", lr_schedule::kind::constant},
    {"exponential", lr_schedule::kind::exponential_decay},
    {"piecewise", lr_schedule::kind::piecewise_constant}};
  if (auto i = schedules.find(cfg.lr_schedule); i != schedules.end())
    setup.train.optimizer.learning_rate.type = i->second;
  else
    errors.push_back("train.lr-schedule = \"" + cfg.lr_schedule
                     + "\" is not a schedule; use \"constant\", \"exponential\" or "
                       "\"piecewise\"");
  if (auto err = setup.train.optimizer.check(); !err.empty())
    errors.push_back("train.optimizer / train.learning-rate / train.lr-*: " + err);
  if (!(t.network.vgg_width > 0 && t.network.vgg_width <= 4))
    errors.push_back("model.vgg-width must be in (0, 4] (1 = the paper's widths)");
  if (t.model == "custom" && num_elements(t.network.input) != 784)
    errors.push_back("model.input = " + to_string(t.network.input) + " holds "
                     + std::to_string(num_elements(t.network.input))
                     + " values per example, but Fashion-MNIST examples hold 784 (e.g. [28, 28, 1] "
                       "or [784])");
  if (!(t.placement_epsilon > 0 && t.placement_epsilon <= 1))
    errors.push_back("train.placement-epsilon must be in (0, 1]");
  if (!(t.clip_norm >= 0) || !std::isfinite(t.clip_norm))
    errors.push_back("train.clip-norm must be 0 (off) or a positive number");
  if (t.last_step < 1)
    errors.push_back("train.last-step must be at least 1 (it is " + std::to_string(t.last_step) + ")");
  if (t.log_interval < 0)
    errors.push_back("train.log-interval must be 0 (off) or more");
  if (cfg.seed < 0)
    errors.push_back("train.seed must not be negative");
  if (cfg.max_refused_steps < 0)
    errors.push_back("train.max-refused-steps must not be negative");
  auto& placements = placement_names();
  if (std::find(placements.begin(), placements.end(), t.placement) == placements.end())
    errors.push_back("train.placement = \"" + t.placement + "\" is not known (known: "
                     + join(placements) + ")");
  // Whether a device exists is checked by the task that computes on it (the
  // chief's machine need not have the workers' GPUs); here only the syntax.
  try {
    gpu::parse_device(t.device);
  } catch (const std::exception& e) {
    errors.push_back(std::string("train.device: ") + e.what());
  }
  for (size_t i = 0; i < t.worker_devices.size(); ++i)
    try {
      gpu::parse_device(t.worker_devices[i]);
    } catch (const std::exception& e) {
      errors.push_back("train.worker-devices[" + std::to_string(i) + "]: " + e.what());
    }
  if (t.worker_devices.size() > cfg.worker_hosts.size())
    errors.push_back("train.worker-devices lists " + std::to_string(t.worker_devices.size())
                     + " devices for " + std::to_string(cfg.worker_hosts.size())
                     + " worker(s) in cluster.worker");
  for (size_t i = 0; i < t.worker_batch_sizes.size(); ++i)
    if (t.worker_batch_sizes[i] < 1)
      errors.push_back("train.worker-batch-sizes[" + std::to_string(i) + "] must be at least 1");
  if (t.worker_batch_sizes.size() > cfg.worker_hosts.size())
    errors.push_back("train.worker-batch-sizes lists " + std::to_string(t.worker_batch_sizes.size())
                     + " sizes for " + std::to_string(cfg.worker_hosts.size())
                     + " worker(s) in cluster.worker");
  if (!(t.gpu_memory_fraction > 0 && t.gpu_memory_fraction <= 1))
    errors.push_back("train.gpu-memory-fraction must be in (0, 1]");
  // Only tasks that read data need the data directory.
  if (setup.whole_cluster || cfg.job_name == "worker" || cfg.job_name == "chief") {
    auto missing = check_mnist_dir(t.data_dir);
    if (!missing.empty())
      errors.push_back("train.data-dir: " + missing
                       + "; install Debian's dataset-fashion-mnist package or point "
                         "train.data-dir at a directory with the four MNIST-format .gz files");
  }
  if (t.epochs < 0 || !std::isfinite(t.epochs))
    errors.push_back("train.epochs must be 0 (use last-step) or a positive number of passes");
  // Every task derives the same last_step from the same file and data.
  bool reads_data = setup.whole_cluster || cfg.job_name == "worker" || cfg.job_name == "chief";
  if (t.epochs > 0 && t.batch_size > 0 && reads_data && errors.empty()) {
    try {
      auto examples = idx_item_count(t.data_dir + "/train-labels-idx1-ubyte.gz");
      // With per-worker batch sizes, a step averages over the workers' sizes.
      double mean_batch = 0;
      for (int32_t w = 0; w < static_cast<int32_t>(cfg.worker_hosts.size()); ++w)
        mean_batch += static_cast<double>(batch_size_of(t, w));
      mean_batch = cfg.worker_hosts.empty() ? static_cast<double>(t.batch_size)
                                            : mean_batch / static_cast<double>(cfg.worker_hosts.size());
      auto per_step = mean_batch
                      * (t.mode == "sync" ? static_cast<double>(setup.train.replicas_to_aggregate)
                                          : 1.0);
      setup.train.last_step
        = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(t.epochs * examples / per_step)));
    } catch (const std::exception& e) {
      errors.push_back(std::string("train.epochs: ") + e.what());
    }
  }
  for (auto [name, value] : {std::pair{"cluster.connect-timeout", cfg.connect_timeout},
                             std::pair{"cluster.request-timeout", cfg.request_timeout},
                             std::pair{"cluster.worker-wait-timeout", cfg.worker_wait_timeout}})
    if (value.count() <= 0)
      errors.push_back(std::string(name) + " must be a positive duration, e.g. 30s");
  setup.runtime.connect_timeout = to_ms(cfg.connect_timeout);
  setup.runtime.request_timeout = to_ms(cfg.request_timeout);
  setup.runtime.worker_wait_timeout = to_ms(cfg.worker_wait_timeout);
  setup.runtime.max_refused_steps = cfg.max_refused_steps;
}

// The embedded default: chief, 2 PS shards and 2 workers in one process.
void apply_embedded_defaults(node_config& cfg) {
  cfg.chief_hosts = {"127.0.0.1:7000"};
  cfg.ps_hosts = {"127.0.0.1:7001", "127.0.0.1:7002"};
  cfg.worker_hosts = {"127.0.0.1:7101", "127.0.0.1:7102"};
}

} // namespace

node_config::node_config()
  : connect_timeout(std::chrono::seconds(60)),
    request_timeout(std::chrono::seconds(30)),
    worker_wait_timeout(std::chrono::seconds(120)) {
  load<caf::io::middleman>();
  opt_group{custom_options_, "global"}
    .add(job_name, "job_name", "this task's job: ps, worker or chief (omit to run every task "
                               "of the cluster in this process)")
    .add(task_index, "task_index", "this task's index within its job");
  opt_group{custom_options_, "cluster"}
    .add(chief_hosts, "chief", "the chief task's host:port (exactly one)")
    .add(ps_hosts, "ps", "PS tasks' host:port list")
    .add(worker_hosts, "worker", "worker tasks' host:port list")
    .add(connect_timeout, "connect-timeout", "how long a node retries to reach its peers")
    .add(request_timeout, "request-timeout", "how long any request waits for its reply")
    .add(worker_wait_timeout, "worker-wait-timeout",
         "the chief fails when no worker has been connected this long");
  opt_group{custom_options_, "train"}
    .add(train.model, "model", "model to train: softmax, mlp, cnn, vgg11, vgg16, vgg19 or custom")
    .add(train.mode, "mode", "update mode: async, or sync (SyncReplicasOptimizer's semantics)")
    .add(train.batch_size, "batch-size", "examples per worker step")
    .add(train.optimizer.learning_rate.base, "learning-rate",
         "the (initial) learning rate of the optimizer")
    .add(train.optimizer.name, "optimizer",
         "update rule applied on the PS shards: sgd, momentum, adagrad, rmsprop, adam")
    .add(train.optimizer.momentum, "momentum", "momentum: the momentum coefficient")
    .add(train.optimizer.nesterov, "nesterov", "momentum: use Nesterov momentum")
    .add(train.optimizer.initial_accumulator, "initial-accumulator",
         "adagrad: starting value of the squared-gradient accumulator")
    .add(train.optimizer.rms_decay, "rms-decay", "rmsprop: decay of the mean square")
    .add(train.optimizer.rms_momentum, "rms-momentum", "rmsprop: momentum")
    .add(train.optimizer.beta1, "beta1", "adam: decay of the first moment")
    .add(train.optimizer.beta2, "beta2", "adam: decay of the second moment")
    .add(train.optimizer.epsilon, "epsilon",
         "rmsprop/adam: epsilon (0: TF's default, 1e-10 / 1e-8)")
    .add(lr_schedule, "lr-schedule", "constant, exponential (decay) or piecewise (constant)")
    .add(train.optimizer.learning_rate.decay_steps, "lr-decay-steps",
         "exponential: steps per decay by lr-decay-rate")
    .add(train.optimizer.learning_rate.decay_rate, "lr-decay-rate", "exponential: decay rate")
    .add(train.optimizer.learning_rate.staircase, "lr-staircase",
         "exponential: decay in whole steps of lr-decay-steps")
    .add(train.optimizer.learning_rate.boundaries, "lr-boundaries",
         "piecewise: the steps where the rate changes, e.g. [1000, 2000]")
    .add(train.optimizer.learning_rate.values, "lr-values",
         "piecewise: the rates, one more than boundaries, e.g. [0.1, 0.01, 0.001]")
    .add(train.clip_norm, "clip-norm",
         "if > 0: workers clip their gradients to this global norm")
    .add(train.last_step, "last-step", "global steps to train; then the cluster stops")
    .add(train.epochs, "epochs",
         "if > 0: passes over the training set instead of last-step (sets last-step)")
    .add(seed, "seed", "seed of initial values and data order")
    .add(train.data_dir, "data-dir", "directory with the Fashion-MNIST .gz files")
    .add(train.log_interval, "log-interval", "progress line every N steps (0: off)")
    .add(train.placement, "placement",
         "variables over PS shards: round_robin (TF), greedy_bytes, or balanced (splits "
         "variables so that no shard holds more than (1 + placement-epsilon) x the mean)")
    .add(train.placement_epsilon, "placement-epsilon", "balanced: allowed excess over the mean")
    .add(train.partitioners, "partitioners",
         "rules splitting variables, first match wins, e.g. [\"fc1/weights fixed_size "
         "shards=2\", \"conv* min_max max_partitions=4 min_slice_bytes=262144\", \"* "
         "axis_size max_shard_bytes=1048576\"]; each takes axis=A (0)")
    .add(train.device, "device", "where workers compute: cpu or cuda:N")
    .add(train.worker_devices, "worker-devices",
         "per worker index, overrides device, e.g. [\"cpu\", \"cuda:0\"] (CPU and GPU workers mix)")
    .add(train.gpu_memory_fraction, "gpu-memory-fraction",
         "share of a GPU's memory one GPU worker may hold; more than is free is an error")
    .add(train.worker_batch_sizes, "worker-batch-sizes",
         "per worker index, overrides batch-size, e.g. [100, 1024]")
    .add(max_refused_steps, "max-refused-steps",
         "the chief aborts after this many refused updates (non-finite gradients)")
    .add(train.shuffle, "shuffle", "reshuffle each worker's data every epoch (false: fixed order)")
    .add(replicas_to_aggregate, "replicas-to-aggregate",
         "sync: gradients averaged per update, R (0: every worker)")
    .add(total_num_replicas, "total-num-replicas",
         "sync: workers taking part, N; must equal the number of worker tasks (0: that "
         "number). Backups come from replicas-to-aggregate < N")
    .add(train.on_worker_loss, "on-worker-loss",
         "sync, when fewer than R workers are left: shrink (average over those alive) or "
         "wait (hold the step until one restarts, at most cluster.worker-wait-timeout)");
  opt_group{custom_options_, "model"}
    .add(train.network.layers, "layers",
         "model custom: one string per layer, e.g. [\"conv2d filters=32 kernel=5\", \"relu\", "
         "\"max_pool size=2\", \"flatten\", \"dense units=10\"]")
    .add(train.network.input, "input", "model custom: one example's shape, e.g. [28, 28, 1]")
    .add(train.network.vgg_width, "vgg-width",
         "vgg11/16/19: multiplies the channel and fc widths (1 = the paper's)");
}

std::string parse_host_port(const std::string& text, host_port& out) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return "'" + text + "' is not host:port (e.g. \"127.0.0.1:7001\")";
  auto port_text = text.substr(colon + 1);
  if (!std::all_of(port_text.begin(), port_text.end(), ::isdigit) || port_text.size() > 5)
    return "'" + text + "' has an invalid port '" + port_text + "' (use 1..65535)";
  auto port = std::stoi(port_text);
  if (port < 1 || port > 65535)
    return "'" + text + "' has port " + port_text + " outside 1..65535";
  out.host = text.substr(0, colon);
  out.port = static_cast<uint16_t>(port);
  return {};
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

load_outcome load_node_config(node_config& cfg, int argc, char** argv) {
  load_outcome out;
  std::vector<std::string> args;
  std::string config_file;
  bool explicit_file = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      out.what = load_outcome::action::help;
    else if (arg == "--dump-config")
      out.what = load_outcome::action::dump_config;
    else if (arg.rfind("--config-file=", 0) == 0) {
      config_file = arg.substr(14);
      explicit_file = true;
    } else if (arg == "--config-file" && i + 1 < argc) {
      config_file = argv[++i];
      explicit_file = true;
    } else
      args.push_back(arg);
  }
  if (out.what == load_outcome::action::help)
    return out;
  if (!explicit_file && std::ifstream(default_config_file))
    config_file = default_config_file;

  std::stringstream ini;
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) {
      out.what = load_outcome::action::fail;
      out.errors.push_back("cannot read the config file '" + config_file
                           + "'; check the path given with --config-file=");
      return out;
    }
    ini << in.rdbuf();
    check_file_keys(cfg, config_file, ini, out.errors);
    ini.clear();
    ini.seekg(0);
  }
  if (config_file.empty())
    apply_embedded_defaults(cfg); // before parsing, so --cluster.* overrides them
  if (auto err = cfg.parse(args, ini)) {
    // CAF names the offending argument; suggest the option it was meant to be.
    std::string bad;
    for (auto& a : args)
      if (caf::to_string(err).find(a) != std::string::npos)
        bad = a;
    std::vector<std::string> flags;
    for (auto& opt : cfg.options())
      flags.push_back(opt.category() == "global" ? str(opt.long_name())
                                                 : str(opt.full_name()));
    auto name = bad.substr(0, bad.find('='));
    name.erase(0, name.find_first_not_of('-'));
    auto suggestion = closest_match(name, flags);
    std::string hint = suggestion.empty() ? "; see troupe-node --help"
                                          : "; did you mean --" + suggestion + "?";
    if (!suggestion.empty() && suggestion == name) {
      auto opt = cfg.options().cli_long_name_lookup(name);
      hint = opt ? "; expected " + type_hint(*opt) : "";
    }
    out.errors.push_back("command line: "
                         + (bad.empty() ? caf::to_string(err) : "cannot use '" + bad + "'") + hint);
  }
  if (!config_file.empty())
    coerce_reals(cfg, config_file, args);
  auto& setup = out.setup;
  setup.config_file = config_file;
  setup.whole_cluster = cfg.job_name.empty();
  if (config_file.empty()) {
    if (!setup.whole_cluster) {
      out.errors.push_back("--job_name=" + cfg.job_name + " needs a cluster: no "
                           + default_config_file + " in the working directory; pass "
                             "--config-file=FILE (examples in config/)");
    } else {
      setup.embedded_defaults = true;
    }
  }
  if (setup.whole_cluster && std::any_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--task_index", 0) == 0;
      }))
    out.errors.push_back("--task_index needs --job_name (ps, worker or chief); without a job "
                         "every task runs in this process");
  validate(cfg, setup, out.errors);
  if (!out.errors.empty())
    out.what = load_outcome::action::fail;
  else if (out.what != load_outcome::action::dump_config)
    out.what = load_outcome::action::run;
  return out;
}

std::string help_text(const node_config& cfg) {
  std::ostringstream out;
  out << "troupe-node: one Troupe task (PS shard, worker or chief), or a whole cluster.\n\n"
         "usage:\n"
         "  troupe-node                               whole cluster in this process "
         "(embedded defaults,\n"
         "                                            or caf-application.conf if present)\n"
         "  troupe-node --job_name=JOB --task_index=N [--config-file=FILE]\n"
         "  troupe-node --dump-config                 print the effective configuration\n\n"
         "Every key can be set in the config file ([section] key = value, INI syntax) or on\n"
         "the command line as --section.key=value. Keys:\n";
  for (auto& opt : cfg.options()) {
    auto category = str(opt.category());
    if (!troupe_categories.count(category)
        && str(opt.long_name()) != "job_name"
        && str(opt.long_name()) != "task_index")
      continue;
    auto value = opt.get();
    out << "  " << (category == "global" ? str(opt.long_name())
                                         : str(opt.full_name()))
        << " (" << opt.type_name() << ", default " << (value ? caf::to_string(*value) : "-")
        << ")\n      " << opt.description() << "\n";
  }
  out << "\nCAF settings used: middleman.heartbeat-interval (default here 1s),\n"
         "middleman.connection-timeout (default here 10s). Exit codes: 0 done, 1 runtime\n"
         "failure, 2 configuration error. See docs/config.md.\n";
  return out.str();
}

// A value as INI text that reads back as the same value: reals keep every
// significant digit and a decimal point (CAF prints six decimals, which
// turns 1e-7 into 0).
std::string ini_text(const caf::config_value& value) {
  if (auto real = caf::get_if<double>(&value)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", *real);
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) // n: nan, inf
      text += ".0";
    return text;
  }
  if (auto list = caf::get_if<caf::config_value::list>(&value)) {
    std::string text = "[";
    for (size_t i = 0; i < list->size(); ++i)
      text += (i ? ", " : "") + ini_text((*list)[i]);
    return text + "]";
  }
  return caf::to_string(value);
}

std::string dump_config(const node_config& cfg, const node_setup& s) {
  std::ostringstream out;
  out << "; effective Troupe configuration"
      << (s.config_file.empty() ? " (embedded defaults)" : " from " + s.config_file) << "\n"
      << "; job: " << (s.whole_cluster ? "whole cluster in one process"
                                       : s.job + ":" + std::to_string(s.task))
      << "\n";
  // Every Troupe key with the value in force, so the dump is a valid config.
  for (auto category : {"cluster", "train", "model"}) {
    out << "\n[" << category << "]\n";
    for (auto& opt : cfg.options())
      if (opt.category() == category)
        if (auto value = opt.get())
          out << str(opt.long_name()) << " = " << ini_text(*value) << "\n";
  }
  out << "\n; derived: last-step " << s.train.last_step << ", replicas-to-aggregate "
      << s.train.replicas_to_aggregate << " of " << s.train.total_num_replicas << " worker(s)\n";
  try {
    auto net = make_model(s.train.model, model_options_of(s.train));
    size_t values = 0;
    for (auto& v : net->variables())
      values += static_cast<size_t>(num_elements(v.shape));
    out << "; network " << net->name() << ": " << net->variables().size() << " variables, "
        << values << " values (" << values * sizeof(float) << " bytes)\n";
    std::istringstream lines(net->describe());
    for (std::string line; std::getline(lines, line);)
      out << ";" << line << "\n";
    auto shards = static_cast<int32_t>(cfg.ps_hosts.size());
    if (shards > 0) {
      auto plan = plan_placement(s.train.placement, net->variables(), shards,
                                 s.train.placement_epsilon,
                                 parse_partition_rules(s.train.partitioners));
      out << "; placement " << s.train.placement << " over " << shards
          << " PS shard(s), imbalance of bytes held " << imbalance(plan, shards) << ":\n";
      for (auto& p : plan)
        out << ";   " << p.slice.name << " " << to_string(p.slice.shape) << " -> ps:" << p.shard
            << "\n";
    }
  } catch (const std::exception& e) {
    out << "; network: " << e.what() << "\n";
  }
  return out.str();
}

} // namespace troupe
