#pragma once
// How a task's part in a run ended: the one list behind every exit code a
// troupe-node process ends with (docs/operations.md#exit-codes), and what
// the chief's stop tells the other tasks. A scheduler retries the
// retryable ones (a Job's podFailurePolicy, JobSet's failurePolicy) and
// fails the job at once on the others. Values are exit codes and cross the
// wire: they never change. No CAF.
#include <cstdint>

namespace troupe {

enum class run_end : int32_t {
  done = 0,      ///< trained to last-step; a worker that left on SIGTERM; --help
  failed = 1,    ///< a failure no other code names (retryable)
  config = 2,    ///< the configuration, or a device this host lacks: nothing started
  bad_data = 3,  ///< data that cannot be read or parsed
  diverged = 4,  ///< non-finite training: retrying repeats it until the settings change
  lost_peer = 5, ///< a task unreachable, or lost and not back, within its timeout
  preempted = 6, ///< stopped by SIGTERM, with the checkpoint a restart continues from
};

constexpr int32_t first_run_end = 0;
constexpr int32_t last_run_end = 6;

/// "diverged", ...
constexpr const char* name_of(run_end end) {
  switch (end) {
    case run_end::done:
      return "done";
    case run_end::failed:
      return "failed";
    case run_end::config:
      return "config";
    case run_end::bad_data:
      return "bad_data";
    case run_end::diverged:
      return "diverged";
    case run_end::lost_peer:
      return "lost_peer";
    case run_end::preempted:
      return "preempted";
  }
  return "failed";
}

/// Whether running the task again can succeed without a person changing anything.
constexpr bool retryable(run_end end) {
  return end == run_end::failed || end == run_end::lost_peer || end == run_end::preempted;
}

/// A code from a peer: its run_end, or failed for a value outside the list.
constexpr run_end run_end_of(int32_t code) {
  return code >= first_run_end && code <= last_run_end ? static_cast<run_end>(code)
                                                       : run_end::failed;
}

} // namespace troupe
