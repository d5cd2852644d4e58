#include "config/node/tf_config.hpp"

#include <algorithm>
#include <climits>
#include <set>

#include "tensor/checkpoint/json.hpp"

namespace troupe {

namespace {

constexpr size_t max_tasks_per_job = 4096;

// A string of TF_CONFIG as an error message may show it: control and
// non-ASCII bytes as \xNN (a NUL or an escape sequence must not reach the
// terminal), at most 60 characters.
std::string shown(const std::string& text) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < 60; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else
      out += static_cast<char>(c);
  }
  return text.size() > 60 ? out + "..." : out;
}

// A job's list of "host:port" strings.
bool host_list(const json::value& v, const std::string& job, std::vector<std::string>& out,
               std::vector<std::string>& errors) {
  auto* list = v.as_array();
  if (!list) {
    errors.push_back("TF_CONFIG: cluster." + job
                     + " must be a list of \"host:port\" strings, e.g. [\"ps-0:2222\"]");
    return false;
  }
  if (list->size() > max_tasks_per_job) {
    errors.push_back("TF_CONFIG: cluster." + job + " lists more than "
                     + std::to_string(max_tasks_per_job) + " tasks");
    return false;
  }
  for (auto& e : *list) {
    auto* s = e.as_string();
    if (!s) {
      errors.push_back("TF_CONFIG: cluster." + job + " holds an entry that is not a string");
      return false;
    }
    out.push_back(*s);
  }
  return true;
}

// TF_CONFIG's text as a JSON object (none, with the error, otherwise).
const json::object* parse_top(const std::string& text, json::value& root,
                              std::vector<std::string>& errors) {
  if (text.size() > (size_t{1} << 20)) {
    errors.push_back("TF_CONFIG is larger than 1 MiB");
    return nullptr;
  }
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    errors.push_back(std::string("TF_CONFIG is not valid JSON: ") + e.what());
    return nullptr;
  }
  auto* top = root.as_object();
  if (!top) {
    errors.push_back("TF_CONFIG must be a JSON object with \"cluster\" and \"task\"");
    return nullptr;
  }
  for (auto& [key, value] : *top)
    if (key != "cluster" && key != "task" && key != "environment" && key != "rpc_layer")
      errors.push_back("TF_CONFIG: unknown field \"" + shown(key)
                       + "\" (known: cluster, task, environment, rpc_layer)");
  return top;
}

// cluster: job -> ["host:port"], with exactly one chief (or master); the
// counts are checked only when nothing else was wrong since `before`.
void read_cluster(const json::object& cluster, tf_config& out, std::vector<std::string>& errors,
                  size_t before) {
  for (auto& [job, hosts] : cluster) {
    if (job == "chief" || job == "master") {
      if (!out.chief.empty() || (job == "master" && cluster.count("chief"))) {
        errors.push_back("TF_CONFIG: cluster names both \"chief\" and \"master\"; they are "
                         "the same job, keep one");
        continue;
      }
      out.master_named = job == "master";
      host_list(hosts, job, out.chief, errors);
    } else if (job == "ps") {
      host_list(hosts, job, out.ps, errors);
    } else if (job == "worker") {
      host_list(hosts, job, out.worker, errors);
    } else if (job == "evaluator") {
      host_list(hosts, job, out.evaluator, errors);
    } else {
      errors.push_back("TF_CONFIG: cluster job \"" + shown(job)
                       + "\" is not one Troupe runs (chief or master, ps, worker, evaluator)");
    }
  }
  if (out.chief.size() != 1 && errors.size() == before)
    errors.push_back("TF_CONFIG: cluster.chief (or master) must list exactly one task; it has "
                     + std::to_string(out.chief.size()));
  if (out.ps.empty() && errors.size() == before)
    errors.push_back("TF_CONFIG: cluster.ps lists no task; Troupe needs at least one");
  if (out.worker.empty() && errors.size() == before)
    errors.push_back("TF_CONFIG: cluster.worker lists no task; Troupe needs at least one");
}

// task: {"type": job, "index": i}; false when it names no task Troupe runs.
bool read_task(const json::value& task, tf_config& out, std::vector<std::string>& errors) {
  for (auto& [key, value] : *task.as_object())
    if (key != "type" && key != "index" && key != "trial")
      errors.push_back("TF_CONFIG: unknown field task." + shown(key) + " (known: type, index)");
  auto* type = task.find("type");
  auto* index = task.find("index");
  if (!type || !type->as_string()) {
    errors.push_back("TF_CONFIG: task.type must be a string: chief, master, ps or worker");
    return false;
  }
  auto job = *type->as_string();
  if (job == "master")
    job = "chief";
  if (job != "chief" && job != "ps" && job != "worker" && job != "evaluator") {
    errors.push_back("TF_CONFIG: task.type \"" + shown(*type->as_string())
                     + "\" is not a job (chief, master, ps, worker, evaluator)");
    return false;
  }
  auto i = index ? index->as_int() : std::optional<int64_t>(0);
  if (!i || *i < 0) {
    errors.push_back("TF_CONFIG: task.index must be a non-negative integer");
    return false;
  }
  out.job = job;
  out.index = static_cast<int32_t>(std::min<int64_t>(*i, INT32_MAX));
  return true;
}

// The task is one the cluster lists (the evaluator needs no address).
void check_task_listed(const tf_config& out, const std::string& type, int32_t max_workers,
                       std::vector<std::string>& errors) {
  if (out.job == "evaluator")
    return;
  auto& tasks = out.job == "chief" ? out.chief : out.job == "ps" ? out.ps : out.worker;
  if (out.job == "worker" && out.index < max_workers)
    return; // elastic membership: a joiner beyond the list
  if (static_cast<size_t>(out.index) >= tasks.size())
    errors.push_back(
      "TF_CONFIG: task " + shown(type) + ":" + std::to_string(out.index)
      + " is not in the cluster (" + shown(type) + " has " + std::to_string(tasks.size())
      + " task(s)" + (out.job == "worker" ? "; cluster.max-workers admits workers beyond them" : "")
      + ")");
}

} // namespace

std::optional<tf_config> parse_tf_config(const std::string& text, std::vector<std::string>& errors,
                                         int32_t max_workers) {
  auto before = errors.size();
  json::value root;
  if (!parse_top(text, root, errors))
    return std::nullopt;
  tf_config out;
  auto* cluster = root.find("cluster") ? root.find("cluster")->as_object() : nullptr;
  if (!cluster)
    errors.push_back(
      "TF_CONFIG: \"cluster\" is missing or not an object of job -> [\"host:port\"]");
  else
    read_cluster(*cluster, out, errors, before);
  auto* task = root.find("task");
  if (!task || !task->as_object()) {
    errors.push_back("TF_CONFIG: \"task\" is missing or not an object like {\"type\": "
                     "\"worker\", \"index\": 0}");
    return std::nullopt;
  }
  if (!read_task(*task, out, errors))
    return std::nullopt;
  if (cluster)
    check_task_listed(out, *task->find("type")->as_string(), max_workers, errors);
  if (errors.size() != before)
    return std::nullopt;
  return out;
}

} // namespace troupe
