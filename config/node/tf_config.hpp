#pragma once
// TF_CONFIG, the environment variable TensorFlow's parameter-server jobs are
// launched with (the Kubeflow operator's TFJob sets it in every pod):
//   {"cluster": {"chief": ["host:port"], "ps": [...], "worker": [...]},
//    "task": {"type": "worker", "index": 1}}
// "master" is the older name of "chief". When it is set, troupe-node takes
// the cluster and this task's job and index from it instead of the config
// file's [cluster] section and --job_name / --task_index. Checked whole:
// any problem is named, and the node exits 2.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

struct tf_config {
  std::vector<std::string> chief, ps, worker, evaluator;
  std::string job; ///< "chief" (also for "master"), "ps", "worker" or "evaluator"
  int32_t index = 0;
  bool master_named = false; ///< the cluster said "master", not "chief"
};

/// Parses TF_CONFIG's text; every problem goes to `errors` (each naming the
/// field and the fix), and nothing is returned when there is one. A worker
/// task may lie beyond cluster.worker, below `max_workers` (cluster.max-workers:
/// a StatefulSet scaled up past the replicas its pods list).
std::optional<tf_config> parse_tf_config(const std::string& text, std::vector<std::string>& errors,
                                         int32_t max_workers = 0);

} // namespace troupe
