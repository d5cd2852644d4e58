#pragma once
// What troupe-serve serves: the model of a serving directory
// (tensor/export/delta_export.hpp) at one version, moved forward delta by
// delta as the chief writes them. Two copies are kept (double buffering): a
// delta is applied to the copy no reader holds, which then becomes the one
// readers get, and the other copy catches up; so a request sees one version
// or the next, never a mix, and never waits on an update. A delta that does
// not apply (damaged, a version missing, a value not finite) is refused,
// and serving goes on at the last good version until a newer base comes.
// A plain export directory is served too, as version 0, without updates.
// No HTTP here.
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tensor/export/delta_export.hpp"

namespace troupe::serve {

class model_versions {
public:
  /// `dir`: a serving directory, or an export directory (model.json).
  explicit model_versions(std::string dir);

  /// The model to answer with (null until one is loaded). A reader keeps
  /// it for one request.
  std::shared_ptr<const served_model> current() const;

  /// Changes the directory's architecture may bring (a base): a network
  /// built from a card stays good while this is unchanged.
  uint64_t generation() const;

  struct look {
    std::vector<std::string> applied; ///< "delta 7 (1204 rows, 0 deleted)", "base 10"
    std::vector<std::string> refused; ///< new refusals, each once
  };
  /// One look at the directory: the newest version where none is loaded;
  /// else each delta after the current version, in order, or a newer base
  /// where the chain cannot go on. Nothing while pinned. Throws where no
  /// model could be loaded at all (checkpoint_error).
  look refresh();

  /// Serves version `version` (its base and the deltas up to it) and stays
  /// there until follow(). Throws checkpoint_error where the directory
  /// cannot build it; the model served is then unchanged.
  void pin(int64_t version);
  /// Moves forward again from the pinned version.
  void follow();
  bool pinned() const;
  /// The newest version in the directory (-1: none; 0: a plain export).
  int64_t newest_on_disk() const;

private:
  /// Replaces both copies with `version`'s (the newest: max); where the
  /// directory reaches another version than `required` (>= 0), throws and
  /// leaves them. A delta refused on the way ends the chain (in `out`).
  void load_both(int64_t version, int64_t required = -1, look* out = nullptr);
  /// Applies delta `version` to both copies; false (and why in `refused`)
  /// where it is refused.
  bool step_to(int64_t version, look& out);
  void publish(std::shared_ptr<served_model> next);

  std::string dir_;
  bool plain_export_ = false;
  mutable std::mutex mutex_; ///< guards active_, standby_, generation_, pinned_
  std::shared_ptr<served_model> active_, standby_;
  uint64_t generation_ = 0;
  bool pinned_ = false;
  std::mutex update_; ///< one update at a time
  std::set<int64_t> refused_;
};

} // namespace troupe::serve
