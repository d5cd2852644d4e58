#pragma once
// The node's configuration: caf-application.conf (INI syntax, as CAF 0.17
// parses it) plus command-line overrides, turned into the typed settings of
// config/settings and checked before anything starts. CAF silently drops
// unknown keys and wrongly typed values; load_node_config finds both and
// names the key and the fix.
//   schema.cpp     every key: its type, default and meaning
//   ini_checks.cpp what CAF's INI parser lets through (unknown keys, types)
//   load.cpp       argv + file -> node_setup, and the checks only a node can do
//   describe.cpp   --help and --dump-config
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>

#include "config/node/cluster_spec.hpp"
#include "config/settings/settings.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/restore.hpp"

namespace troupe {

class node_config : public caf::actor_system_config {
public:
  node_config();

  // -- bound options: the single place that knows option names --------------
  // Values the file writes as text (enums, devices, rules) are bound as text
  // here and parsed once by load_node_config.
  std::string job_name;   // global: ps | worker | chief (empty: whole cluster here)
  int32_t task_index = 0; // global
  std::vector<std::string> chief_hosts, ps_hosts, worker_hosts;
  caf::timespan connect_timeout;
  caf::timespan request_timeout;
  caf::timespan worker_wait_timeout;
  caf::timespan step_lease_timeout;
  caf::timespan recovery_timeout;
  caf::timespan save_interval;  // checkpoint
  caf::timespan delta_interval; // export
  int64_t base_every = 10;      // export
  int64_t keep = 5;             // checkpoint
  std::string restore = "auto";
  training_settings train;
  std::string model = "softmax";
  std::string mode = "async";
  std::string wire_precision = "fp32";
  std::string optimizer = "sgd";
  std::string lr_schedule = "constant";
  std::string placement = "balanced";
  std::vector<std::string> partitioners;
  std::string device = "cpu";
  std::vector<std::string> worker_devices;
  std::string on_worker_loss = "shrink";
  int64_t seed = 42; // bound separately: CAF has no uint64 option type
  int64_t max_refused_steps = 100;
  int64_t max_connections = 0;             // cluster: 0 = 2 x tasks + 64
  int64_t max_workers = 0;                 // cluster: 0 = only the listed workers
  bool bulk_path = true;                   // cluster
  bool allow_plain = false;                // cluster: plain TCP between hosts
  int64_t metrics_port = -1;               // metrics: -1 = the task's port + 10000, 0 = off
  std::string metrics_address;             // metrics: empty = the task's host
  bool metrics_plain = false;              // metrics: plain HTTP although [openssl] is set
  std::string replicas_to_aggregate = "0"; ///< a count, or "all"
  // [data] values written as text, and [model] values the data may supply
  std::string csv_delimiter = ",";
  std::string normalize = "auto";
  std::string bad_records = "fail";
  std::string missing_values = "mean";
  std::vector<std::string> missing_fill; // "column=value" each
  std::string task = "classification";
  std::vector<int64_t> model_input; // empty: the data's
  int64_t model_classes = 0;        // 0: the data's
  int64_t total_num_replicas = 0;
  // [embedding] values written as text
  std::string embedding_initializer = "truncated_normal";
  std::string embedding_optimizer = "adagrad";
  std::string sync_reduction = "per_row";
  std::string embedding_kind = "hash";
  std::string embedding_partition = "mod";
  std::string embedding_ids = "identity";

  const caf::config_option_set& options() const noexcept { return custom_options_; }

private:
  // The options of each section, bound to the members above.
  void add_global_options();
  void add_cluster_options();
  void add_train_options();
  void add_optimizer_options();
  void add_step_options();
  void add_placement_options();
  void add_checkpoint_options();
  void add_model_options();
  void add_data_options();
  void add_data_reading_options();
  void add_embedding_options();
  void add_metrics_options();
};

/// What the node will do, once the configuration checked out.
struct node_setup {
  bool whole_cluster = false; // every task in this process (embedded default)
  bool embedded_defaults = false;
  std::string config_file;        // empty when none was read
  job_kind job = job_kind::chief; // when !whole_cluster
  int32_t task = 0;
  cluster_spec cluster;
  bool tls = false; ///< [openssl] configured: every connection is mutual TLS
  /// Connections a listening task holds at most (cluster.max-connections).
  size_t max_connections = 0;
  /// Where the task serves /metrics, /healthz and /readyz (none: off), and
  /// whether under the cluster's mutual TLS.
  std::optional<host_port> metrics;
  bool metrics_tls = false;
  std::string metrics_note; ///< why a task that would serve metrics does not (logged)
  /// --restore: auto, never or a checkpoint directory (the chief's).
  restore_request restore;
  /// The checkpoint the chief starts from (null: from the seed), and what
  /// choosing it found (logged at start).
  std::shared_ptr<const checkpoint_reader> restore_from;
  std::vector<std::string> restore_notes;
  std::vector<std::string> restore_warnings;
  training_settings train;
  runtime_settings runtime;
  /// The data as catalogued at start (tasks that read data; null on ps).
  std::shared_ptr<const data_catalog> data;
  /// The data could not be read or parsed (the task exits bad_data, not config).
  bool data_unreadable = false;
  /// Where a key's value came from, by "section.key" (and "job_name",
  /// "task_index"): "TF_CONFIG", "the command line" or the config file's
  /// path; absent: the default. --dump-config prints it.
  std::map<std::string, std::string> sources;
  /// "ps:0", or "local" for the whole cluster: the node's name in logs.
  std::string name() const;
};

struct load_outcome {
  enum class action { run, help, dump_config, fail } what = action::fail;
  std::vector<std::string> errors; // each names the key and the fix
  node_setup setup;
};

/// Parses argv and the config file (--config-file=F, else caf-application.conf
/// in the working directory if present, else the embedded defaults) into cfg,
/// then validates everything. `cluster_known`, where given, is called once
/// the cluster and this task's job are known and valid, before the data is
/// read (which can take minutes): the chief holds its port from there.
load_outcome load_node_config(node_config& cfg, int argc, char** argv,
                              const std::function<void(const node_setup&)>& cluster_known = {});

/// --help: every option with its type, default and meaning.
std::string help_text(const node_config& cfg);

/// --dump-config: the effective configuration as a valid config file, then
/// the network: every layer and variable with its shape and size.
std::string dump_config(const node_config& cfg, const node_setup& setup);

} // namespace troupe
