// The cluster part of loading a node's configuration (load_steps.hpp): its
// addresses, its job and task, TF_CONFIG, how many connections it holds,
// and whether plain TCP would expose it.
#include <algorithm>
#include <set>

#include "config/node/load_steps.hpp"
#include "config/node/tf_config.hpp"

namespace troupe::load_steps {

namespace {

void check_hosts(const char* job, const std::vector<std::string>& entries,
                 std::vector<host_port>& out, std::set<std::string>& seen,
                 std::vector<std::string>& errors) {
  for (auto& entry : entries) {
    host_port hp;
    if (auto err = parse_host_port(entry, hp)) {
      errors.push_back(std::string("cluster.") + job + ": " + err->message);
      continue;
    }
    if (!seen.insert(hp.to_string()).second)
      errors.push_back(std::string("cluster.") + job + ": address " + hp.to_string()
                       + " is used by two tasks; give every task its own host:port");
    out.push_back(hp);
  }
}

// Whether `host` can only be this machine: localhost or a loopback address.
bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "ip6-localhost" || host == "::1"
         || host.rfind("127.", 0) == 0;
}

} // namespace

// This node's addresses, job and task.
void check_cluster(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  std::set<std::string> seen;
  check_hosts("chief", cfg.chief_hosts, setup.cluster.chief, seen, errors);
  check_hosts("ps", cfg.ps_hosts, setup.cluster.ps, seen, errors);
  check_hosts("worker", cfg.worker_hosts, setup.cluster.worker, seen, errors);
  if (cfg.chief_hosts.size() != 1)
    errors.push_back("cluster.chief must list exactly one task (it has "
                     + std::to_string(cfg.chief_hosts.size())
                     + "), e.g. chief = [\"127.0.0.1:7000\"]");
  setup.task = cfg.task_index;
  if (setup.whole_cluster)
    return;
  auto job = enum_from_name<job_kind>(cfg.job_name);
  if (!job) {
    errors.push_back("--job_name=" + cfg.job_name
                     + " is not a job; use ps, worker, chief or evaluator");
    return;
  }
  setup.job = *job;
  if (*job == job_kind::evaluator) {
    if (cfg.task_index != 0)
      errors.push_back("--task_index=" + std::to_string(cfg.task_index)
                       + ": there is one evaluator, task 0");
    if (cfg.train.checkpoint.log_dir.empty())
      errors.push_back("the evaluator keeps its copies of the chief's checkpoints and its "
                       "TensorBoard scalars in checkpoint.log-dir: set it (a directory of its "
                       "own; no volume shared with the chief is needed)");
    return;
  }
  auto listed_workers = static_cast<int64_t>(cfg.worker_hosts.size());
  auto tasks = *job == job_kind::chief ? cfg.chief_hosts.size()
               : *job == job_kind::ps
                 ? cfg.ps_hosts.size()
                 : static_cast<size_t>(std::max(listed_workers, cfg.max_workers)); // elastic
  if (cfg.task_index < 0 || static_cast<size_t>(cfg.task_index) >= tasks)
    errors.push_back("--task_index=" + std::to_string(cfg.task_index) + " is out of range: job "
                     + cfg.job_name + " has " + std::to_string(tasks) + " task(s) in cluster."
                     + cfg.job_name + " (valid: 0.."
                     + std::to_string(static_cast<int64_t>(tasks) - 1) + ")");
}

// TF_CONFIG (tf_config.hpp) in place of [cluster] and --job_name /
// --task_index; a --job_name or --task_index that says otherwise is an
// error. True when it applied.
bool apply_tf_config(node_config& cfg, const std::string& text, node_setup& setup,
                     std::vector<std::string>& errors) {
  auto tf = parse_tf_config(
    text, errors,
    static_cast<int32_t>(std::clamp<int64_t>(cfg.max_workers, 0, limits::max_workers)));
  if (!tf)
    return false;
  auto given = [&](const char* key) { return setup.sources.count(key) > 0; };
  if (given("job_name") && cfg.job_name != tf->job) {
    errors.push_back("--job_name=" + cfg.job_name + " disagrees with TF_CONFIG's task.type ("
                     + tf->job + "); drop --job_name: TF_CONFIG names the task");
    return false;
  }
  if (given("task_index") && cfg.task_index != tf->index) {
    errors.push_back("--task_index=" + std::to_string(cfg.task_index)
                     + " disagrees with TF_CONFIG's task.index (" + std::to_string(tf->index)
                     + "); drop --task_index: TF_CONFIG names the task");
    return false;
  }
  cfg.chief_hosts = tf->chief;
  cfg.ps_hosts = tf->ps;
  cfg.worker_hosts = tf->worker;
  cfg.job_name = tf->job;
  cfg.task_index = tf->index;
  for (auto key : {"cluster.chief", "cluster.ps", "cluster.worker", "job_name", "task_index"})
    setup.sources[key] = "TF_CONFIG";
  return true;
}

// Enough for every task of the cluster to connect, with room for restarts
// and tools; bounded so that strangers cannot exhaust the descriptors.
void check_max_connections(const node_config& cfg, node_setup& setup,
                           std::vector<std::string>& errors) {
  auto workers = std::max(static_cast<int64_t>(cfg.worker_hosts.size()), cfg.max_workers);
  auto tasks = static_cast<int64_t>(cfg.chief_hosts.size() + cfg.ps_hosts.size()) + workers;
  auto value = cfg.max_connections;
  if (value == 0) {
    setup.max_connections = static_cast<size_t>(2 * tasks + 64);
    return;
  }
  if (value < tasks || value > limits::max_connections) {
    errors.push_back("cluster.max-connections = " + std::to_string(value)
                     + " is out of range; use 0 (automatic: 2 x tasks + 64) or "
                     + std::to_string(tasks) + " (the cluster's tasks) to "
                     + std::to_string(limits::max_connections));
    return;
  }
  setup.max_connections = static_cast<size_t>(value);
}

// The derived port keeps a fixed distance from the cluster port, so that
// an operator finds it (docs/operations.md#metrics) and a local cluster's
// tasks, on neighbouring ports, get neighbouring metrics ports.
void check_metrics(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  constexpr int64_t offset = 10000;
  auto port = cfg.metrics_port;
  if (port < -1 || port > 65535) {
    errors.push_back("metrics.port = " + std::to_string(port)
                     + " is out of range; use -1 (the task's port + 10000), 0 (none) or 1-65535");
    return;
  }
  bool has_address = !setup.whole_cluster && setup.job != job_kind::evaluator;
  const host_port* own = nullptr;
  if (has_address) {
    auto& tasks = setup.cluster.tasks(setup.job);
    if (setup.task < 0 || static_cast<size_t>(setup.task) >= tasks.size())
      return; // reported by check_cluster
    own = &tasks[static_cast<size_t>(setup.task)];
  }
  if (port == 0 || (port == -1 && !own))
    return;
  bool derived = port == -1;
  if (derived)
    port = own->port + offset <= 65535 ? own->port + offset : own->port - offset;
  host_port at{cfg.metrics_address.empty() ? (own ? own->host : std::string("127.0.0.1"))
                                           : cfg.metrics_address,
               static_cast<uint16_t>(port)};
  for (auto job : {job_kind::chief, job_kind::ps, job_kind::worker})
    for (auto& task : setup.cluster.tasks(job))
      if (task.port == at.port && (task.host == at.host || !own || &task == own)) {
        if (derived) { // not the user's choice: the task runs without metrics, saying why
          setup.metrics_note = "no metrics port: the derived port " + std::to_string(port)
                               + " is the cluster port of " + task.to_string()
                               + "; set metrics.port to a free port";
          return;
        }
        errors.push_back("metrics.port = " + std::to_string(port) + " is the cluster port of "
                         + task.to_string()
                         + "; the metrics port must differ from the training ports: set "
                           "metrics.port to a free port, or -1 for the task's port + 10000");
        return;
      }
  setup.metrics = at;
  setup.metrics_tls = setup.tls && !cfg.metrics_plain;
}

// Plain TCP between hosts lets anyone who reaches a port act as a task
// (docs/operations.md#security): a cluster that spans hosts runs under
// mutual TLS, or says in its config that its network is trusted.
void check_plain_exposure(const node_config& cfg, const node_setup& setup,
                          std::vector<std::string>& errors) {
  if (setup.tls || cfg.allow_plain || setup.whole_cluster)
    return;
  for (auto* job : {&setup.cluster.chief, &setup.cluster.ps, &setup.cluster.worker})
    for (auto& task : *job)
      if (!is_loopback(task.host)) {
        errors.push_back(
          "the cluster spans hosts (" + task.to_string()
          + " is not a loopback address) but [openssl] is not configured: over plain TCP "
            "anyone who reaches its ports can join, read and change the model. Configure "
            "mutual TLS ([openssl] certificate, key and cafile; scripts/make-certs makes "
            "them), or set cluster.allow-plain = true if only the cluster's own hosts can "
            "reach them (docs/operations.md#security)");
        return;
      }
}

} // namespace troupe::load_steps
