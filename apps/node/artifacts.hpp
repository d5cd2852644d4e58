#pragma once
// What a run leaves behind for its user: the data's and the model's
// description beside the checkpoints, the exported model, and the final line.
#include <cstdint>
#include <string>

#include "actors/cluster.hpp"
#include "config/node/node_config.hpp"
#include "tensor/export/model_export.hpp"

namespace troupe::node {

/// The run's model card (network, input, classes, labels, normalisation) at `step`.
model_card card_of(const node_setup& setup, int64_t step);
/// The data as the run sees it: logged, and saved as <log-dir>/data.json and
/// <log-dir>/model.json (what troupe-export reads beside the checkpoints).
/// Returns the final line's data summary.
std::string announce_data(const node_setup& setup);
/// A run that ended well leaves its model in <log-dir>/export.
void export_model(const node_setup& setup, const training_result& result);
/// The final line (and the traffic line before it) on stdout; to the log
/// when stdout is gone.
void print_final(const training_result& result);

} // namespace troupe::node
