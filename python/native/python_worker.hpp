#pragma once
// A worker task of a Troupe cluster inside a Python process: troupe-node's
// worker role (apps/node: connect to the chief and the shards, the worker
// actor with its leases, reports, bulk path and recovery) on a thread of
// its own, with the model's compute handed to the Python thread through a
// compute_handoff. Nothing of the worker is written again here.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "config/node/node_config.hpp"
#include "python/native/compute_handoff.hpp"

namespace troupe::python {

/// A configuration the loader refused: every problem, one a line, each
/// naming the key and the fix.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// node_config loaded from troupe-node's command line `args` (without the
/// program name); throws config_error. `for_worker`: the task must be a
/// worker of a cluster (not the whole cluster in one process).
struct loaded_node {
  std::unique_ptr<node_config> cfg;
  load_outcome outcome;
};
loaded_node load_node(const std::vector<std::string>& args, bool for_worker);

class python_worker {
public:
  /// Throws config_error where the configuration is refused or names no
  /// worker task, or where a declaration is given and train.model is not
  /// "declared" (or the other way round), or the declaration is refused.
  explicit python_worker(const std::vector<std::string>& args,
                         std::optional<model_declaration> declaration = std::nullopt);
  ~python_worker();
  python_worker(const python_worker&) = delete;
  python_worker& operator=(const python_worker&) = delete;

  const node_setup& setup() const { return loaded_.outcome.setup; }
  /// The variables the steps hand over, in the model's order.
  const std::vector<variable_spec>& variables() const { return variables_; }
  /// The model's tables, in its order.
  const std::vector<table_spec>& tables() const { return tables_; }
  /// Where a batch's keys lie in its examples (a model of the settings
  /// reading categorical data; none otherwise).
  const key_layout& keys() const { return keys_; }
  compute_handoff& handoff() { return *handoff_; }

  /// Joins the cluster on a thread of its own (once).
  void start();
  /// Ends the run for this worker: a step waiting is refused with `why`
  /// and the worker stops.
  void stop(const std::string& why);
  /// SIGTERM's meaning for a worker: it leaves the run once the step under
  /// way is pushed and reported, and ends with exit code 0. For the whole
  /// process, as troupe-node's handler: a worker started later leaves at once.
  void leave();
  /// Waits for the worker's thread: troupe-node's exit code (0: the run
  /// finished), or nullopt while it runs and `wait` is not over.
  std::optional<int> join(std::chrono::milliseconds wait);
  /// The worker's last error lines (at most 3), oldest first: why it ended
  /// with a non-zero exit code.
  std::vector<std::string> errors() const;

private:
  int run();

  loaded_node loaded_;
  std::vector<variable_spec> variables_;
  std::vector<table_spec> tables_;
  key_layout keys_;
  std::shared_ptr<program_model> declared_; // train.model = declared: the program's model
  std::shared_ptr<compute_handoff> handoff_ = std::make_shared<compute_handoff>();
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable finished_;
  std::optional<int> exit_code_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> errors_;
};

} // namespace troupe::python
