#pragma once
// Checkpoints over the network, for an evaluator without a volume shared with
// the chief (issue 26): the chief's process serves the files of its newest
// complete checkpoint (checkpoint_source_actor, protocol.hpp), the evaluator
// copies them into its own directory and opens the copy as it would a
// checkpoint on disk, every check included.
#include <cstdint>
#include <functional>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/protocol/protocol.hpp"

namespace troupe {

/// The chief's side: what its log directory offers. Reads the directory on
/// every call (keep-N deletes old checkpoints meanwhile); throws
/// checkpoint_error.
class checkpoint_catalog {
public:
  explicit checkpoint_catalog(std::string log_dir) : log_dir_(std::move(log_dir)) {}

  /// The newest complete checkpoint if its step is after `step`; else step -1.
  checkpoint_listing newest_after(int64_t step) const;
  /// Up to `max_bytes` of `name` from `offset`. `name` must be a file of
  /// checkpoint `step`'s listing, as newest_after names it: nothing else
  /// of the chief's disk can be read.
  std::string read(int64_t step, const std::string& name, uint64_t offset,
                   uint64_t max_bytes) const;

private:
  checkpoint_listing listing_of(int64_t step, const std::string& path) const;
  std::string log_dir_;
};

/// The evaluator's side: copies a listed checkpoint into `local_dir`.
class checkpoint_fetcher {
public:
  /// Reads `bytes` of a listed file from an offset; throws on failure.
  using reader = std::function<std::string(const std::string& name, uint64_t offset)>;
  struct copy {
    std::string checkpoint; ///< local_dir/step-<step>/ckpt-<step>
    std::string card;       ///< its model.json
  };

  /// max_bytes: the most a listing may announce in all (a bound before
  /// anything is written).
  checkpoint_fetcher(std::string local_dir, uint64_t max_bytes)
    : local_dir_(std::move(local_dir)), max_bytes_(max_bytes) {}

  /// Copies every file of `listing`; throws checkpoint_error for a listing
  /// that names files outside its checkpoint, announces too much, or a file
  /// whose bytes differ from its listed size. Earlier copies are deleted.
  copy fetch(const checkpoint_listing& listing, const reader& read) const;

private:
  std::string local_dir_;
  uint64_t max_bytes_;
};

/// A detached actor serving `log_dir`'s checkpoints; it quits once told
/// stop (by its own process) and every follower that asked has been told
/// that nothing newer will come, or has gone.
checkpoint_source_actor spawn_checkpoint_source(caf::actor_system& sys, std::string log_dir);

} // namespace troupe
