#pragma once
// A cluster as the config file writes it: the jobs of a run and the address
// of each task (TF's ClusterSpec), and which task this node is.
#include <cstdint>
#include <string>
#include <vector>

#include "config/settings/settings.hpp"

namespace troupe {

/// evaluator: TensorFlow's evaluator job; it follows the chief's log
/// directory and takes no part in training (no address, no messages).
enum class job_kind { chief, ps, worker, evaluator };

TROUPE_ENUM_NAMES(job_kind, {job_kind::chief, "chief"}, {job_kind::ps, "ps"},
                  {job_kind::worker, "worker"}, {job_kind::evaluator, "evaluator"});

struct host_port {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const { return host + ":" + std::to_string(port); }
};

/// "host:port" into `out`; a failure names the text and the fix.
maybe_failure parse_host_port(const std::string& text, host_port& out);

struct cluster_spec {
  std::vector<host_port> chief;
  std::vector<host_port> ps;
  std::vector<host_port> worker;

  cluster_shape shape() const {
    return {static_cast<int32_t>(ps.size()), static_cast<int32_t>(worker.size())};
  }
  /// The tasks of a job that has addresses (not the evaluator).
  const std::vector<host_port>& tasks(job_kind job) const {
    return job == job_kind::chief ? chief : job == job_kind::ps ? ps : worker;
  }
};

} // namespace troupe
