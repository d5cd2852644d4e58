#pragma once
// Which checkpoint a run starts from (--restore=auto|never|PATH), and
// whether it fits the model and optimizer configured now: a checkpoint of
// another model, of other shapes or of another optimizer is refused before
// anything starts, naming the variable and both shapes.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/optim/optimizer.hpp"

namespace troupe {

/// What must not change across a restore: the model, the optimizer and the
/// slots it keeps.
std::map<std::string, std::string> checkpoint_fingerprint(model_kind model,
                                                          optimizer_kind optimizer);

/// Every reason `manifest` cannot be restored into a model with `variables`
/// trained with `fingerprint`; empty when it can.
std::vector<std::string> restore_problems(const checkpoint_manifest& manifest,
                                          const std::map<std::string, std::string>& fingerprint,
                                          const std::vector<variable_spec>& variables);

struct restore_choice {
  std::shared_ptr<const checkpoint_reader> reader; ///< null: initialise from the seed
  std::vector<std::string> notes;                  ///< what was chosen, for the log
  std::vector<std::string> warnings;               ///< checkpoints skipped, and why
};

/// --restore: which checkpoint a run starts from.
struct restore_request {
  enum class kind {
    automatic, ///< "auto": the latest usable one in the log directory, if any
    never,     ///< "never": from the seed
    directory  ///< that checkpoint directory
  } how = kind::automatic;
  std::string directory; ///< for kind::directory

  /// "auto", "never" or a directory; none for an empty text.
  static std::optional<restore_request> parse(const std::string& text);
};

/// automatic: the checkpoint the pointer file names, or, if it is corrupt
/// or missing, the newest complete one that checks out (the notes say which
/// was skipped and why); none in the directory: a fresh start. never: a
/// fresh start. directory: that one. Throws checkpoint_error when a named
/// checkpoint, or every one found, is unusable.
restore_choice choose_checkpoint(const std::string& log_dir, const restore_request& restore);

} // namespace troupe
