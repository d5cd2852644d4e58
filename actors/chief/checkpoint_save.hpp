#pragma once
// One checkpoint save of the chief as a state machine, free of CAF: events
// in (a save is due, the end wants a final one, the fence is reached, a
// shard's copy came or failed, the writer reported), actions out (hold or
// resume the grants, ask the shards for their copies at a version, hand the
// copies to the writer, run what waited for the final save). The actor
// carries the actions out; the machine decides.
//
// Async: new grants are held until every granted step is in (the fence),
// then every shard copies its state at that update and training resumes.
// Sync: the shards copy after the update after next (they cannot have
// passed it), nothing pauses. At the end of a run, or on SIGTERM, a final
// save holds the last state; it takes over a fence not yet reached, and
// waits for a save whose copies are under way.
#include <cstdint>
#include <optional>
#include <string>

namespace troupe {

class checkpoint_save {
public:
  /// Where the run is when an event comes.
  struct context {
    int64_t step = 0;      ///< the global step
    bool training = true;  ///< false: every step is in, the shards are still
    bool sync = false;     ///< sync mode (no fence)
    int64_t last_step = 0; ///< train.last_step
  };

  /// What the actor is to do, in this order.
  struct actions {
    bool hold_grants = false;              ///< async: the fence begins
    std::optional<int64_t> request_copies; ///< ask every shard for its copy at this version
    bool resume_grants = false;            ///< the fence is over (if grants are held, training)
    std::optional<int64_t> write;          ///< every copy is in: write the checkpoint of this step
    bool final_over = false;               ///< the final save is over: run what waited for it
    std::string abandoned;                 ///< why a save was given up (logged), or empty
    std::optional<int64_t> began;          ///< a save began at this step (the schedule restarts)
  };

  /// `last_saved_step`: the step the latest checkpoint holds (-1: none).
  explicit checkpoint_save(int64_t last_saved_step = -1) : last_saved_(last_saved_step) {}

  /// The schedule says a save is due (ignored while one runs).
  actions begin_periodic(const context& now);
  /// The run ends (or was preempted): a final save, then final_over (at
  /// once when the latest checkpoint holds this step already).
  actions want_final(const context& now);
  /// Async: every granted step is in; `step` is the global step.
  actions fence_reached(int64_t step);
  /// A shard's copy of attempt `id` came; `parts` shards hold variables.
  actions copy_arrived(uint64_t id, size_t parts);
  /// A shard's copy of attempt `id` failed: the save is given up.
  actions copy_failed(uint64_t id, const std::string& why);
  /// The writer reported on the checkpoint of `step`.
  actions written(const context& now, int64_t step, bool ok, const std::string& what);
  /// A lost shard: the save under way is void (the restore starts anew).
  void drop() { attempt_.reset(); }
  /// The run (re)starts from the checkpoint of `step`.
  void restored_at(int64_t step) { last_saved_ = step; }

  bool saving() const noexcept { return attempt_.has_value(); }
  /// The attempt under way (its id tags the copies' replies).
  uint64_t id() const noexcept { return attempt_ ? attempt_->id : 0; }
  bool final() const noexcept { return attempt_ && attempt_->final; }
  int64_t version() const noexcept { return attempt_ ? attempt_->version : 0; }
  int64_t last_saved_step() const noexcept { return last_saved_; }
  /// Why the final checkpoint could not be written (empty: it was, or none was wanted).
  const std::string& final_error() const noexcept { return final_error_; }

private:
  struct attempt {
    uint64_t id = 0;
    bool final = false;
    bool requested = false; // the shards were asked for their copies
    int64_t version = 0;
    size_t answered = 0;
  };
  void begin(const context& now, bool final, actions& out);
  void request(int64_t version, actions& out);
  void final_ended(const std::string& error, actions& out);

  std::optional<attempt> attempt_;
  uint64_t attempts_ = 0;
  bool final_wanted_ = false; // a final save waits for the one under way
  int64_t last_saved_;
  std::string final_error_;
};

} // namespace troupe
