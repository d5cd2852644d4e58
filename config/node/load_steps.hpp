#pragma once
// The steps of load_node_config that check the cluster (cluster_checks.cpp)
// and the data (data_checks.cpp), internal to config/node. Each appends what
// is wrong to `errors`.
#include <string>
#include <vector>

#include "config/node/node_config.hpp"

namespace troupe::load_steps {

/// This node's addresses, job and task.
void check_cluster(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors);
/// TF_CONFIG in place of [cluster] and --job_name / --task_index; a
/// --job_name or --task_index that says otherwise is an error. True when it applied.
bool apply_tf_config(node_config& cfg, const std::string& text, node_setup& setup,
                     std::vector<std::string>& errors);
/// Enough for every task of the cluster to connect, with room for restarts
/// and tools; bounded so that strangers cannot exhaust the descriptors.
void check_max_connections(const node_config& cfg, node_setup& setup,
                           std::vector<std::string>& errors);
/// Where the task serves its metrics and probes (metrics.*): never on a
/// cluster port.
void check_metrics(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors);
/// A cluster that spans hosts runs under mutual TLS, or says in its config
/// that its network is trusted (cluster.allow-plain).
void check_plain_exposure(const node_config& cfg, const node_setup& setup,
                          std::vector<std::string>& errors);

/// Tasks that read data catalogue it and take one example's shape and the
/// classes from it (a ps task: from the config or Fashion-MNIST's).
void catalog_for_node(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors);
/// Checks that need the data's size: every batch fits the training set,
/// every worker up to cluster.max-workers gets a share; train.epochs
/// becomes last_step, the same on every task.
void check_data_size(node_setup& setup, std::vector<std::string>& errors);

} // namespace troupe::load_steps
