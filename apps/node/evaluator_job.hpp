#pragma once
// TensorFlow's evaluator job: follows the chief's checkpoints over the
// network (no volume shared with the chief) and evaluates each new one (the
// newest, when several arrived) on the evaluation set, logging it and
// writing TensorBoard scalars to <its log-dir>/eval. It only reads, so it
// cannot slow training beyond the copy. A checkpoint deleted by keep-N while
// it is copied is skipped; a lost chief is looked for again for
// cluster.recovery-timeout. It exits 0 once the chief said nothing newer
// will come, 1 when no new checkpoint came for checkpoint.save-interval +
// cluster.recovery-timeout or the chief is gone for good.
#include <chrono>
#include <cstdint>
#include <functional>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/protocol/protocol.hpp"
#include "config/node/node_config.hpp"

namespace troupe {

/// Reaches the chief at the cluster's address, retrying for at most `within`.
using chief_finder = std::function<caf::expected<chief_actor>(std::chrono::milliseconds within)>;

/// The evaluator task; returns the process's exit code (0 or 1).
int run_evaluator(caf::actor_system& sys, const node_setup& setup, uint64_t model_bytes,
                  chief_finder find_chief);

} // namespace troupe
