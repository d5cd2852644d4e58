#pragma once
// What a shard in sync mode makes of one worker's push for a step, dense
// gradients (sync_accumulator) and embedding rows (table_store) alike.

namespace troupe {

enum class sync_verdict {
  accepted,  ///< counted towards the current step
  stale,     ///< for a step already applied: dropped
  duplicate, ///< the worker pushed this step before: its first push counts
  ahead,     ///< for a step the shard has not reached: refused
};

} // namespace troupe
