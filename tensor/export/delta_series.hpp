#pragma once
// The chief's side of delta exports: turns each new checkpoint of a run
// into the next version of its serving directory (delta_export.hpp): a
// delta against the version before, and every `base_every` deltas (and
// whenever the version before cannot be compared against) a full base
// too. The rows of the last version are tracked by fingerprint, so a
// delta holds just the rows that changed; every dense variable is in each.
// Reads checkpoints only: the shards do no work for it, and a ps restored
// from a checkpoint, or a table resharded, changes nothing here (rows are
// compared by key). No CAF.
#include <cstdint>
#include <string>

#include "tensor/export/delta_export.hpp"

namespace troupe {

class delta_series {
public:
  /// `dir`: the serving directory; `card_path`: the run's model.json.
  delta_series(std::string dir, std::string card_path, int32_t base_every);

  /// Continues the directory's versions: the newest one's step, and where
  /// that step's checkpoint is in `log_dir`, its rows, so that the next
  /// version may be a delta. Otherwise the next version is a base.
  /// Returns a line for the log.
  std::string resume(const std::string& log_dir);

  /// The next version from checkpoint `checkpoint_dir` (nothing where its
  /// step is the last version's). Returns a line for the log, or "".
  /// Throws checkpoint_error (the checkpoint unreadable, the disk full):
  /// nothing is tracked from a version not written.
  std::string add(const std::string& checkpoint_dir);

private:
  std::string dir_, card_path_;
  int32_t base_every_;
  int64_t version_ = 0; ///< the last version written (0: none)
  int64_t step_ = -1;   ///< its step
  int32_t deltas_since_base_ = 0;
  bool tracking_ = false; ///< fingerprints_ hold version_'s rows
  row_fingerprints fingerprints_;
};

} // namespace troupe
