#pragma once
// Async with train.report-every = k: the reports of finished steps wait
// here and go to the chief k at a time, in one message, so that the chief
// handles one message per k steps of each worker. A batch goes early once
// it holds as many reports as the worker holds steps still to start (near
// the end of a run, or of a checkpoint's fence, the chief grants fewer, and
// a worker must not run dry waiting for a full batch), and when it leaves.
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/protocol/protocol.hpp"

namespace troupe {

class report_batch {
public:
  /// A new plan: nothing pending; every <= 1 reports each step alone.
  void reset(int32_t every) {
    every_ = every < 1 ? 1 : every;
    pending_.clear();
  }
  bool batched() const noexcept { return every_ > 1; }
  bool empty() const noexcept { return pending_.empty(); }

  /// A finished step's report; true when the batch should go now: it is
  /// full, or holds at least as many reports as the worker holds steps
  /// still to start (`queued`), which it computes while the batch is answered.
  bool add(const step_report& report, size_t queued) {
    pending_.push_back(report);
    return pending_.size() >= static_cast<size_t>(every_) || pending_.size() >= queued;
  }

  /// The reports to send, oldest first; the batch is empty afterwards.
  std::vector<step_report> take() { return std::exchange(pending_, {}); }

private:
  int32_t every_ = 1;
  std::vector<step_report> pending_;
};

} // namespace troupe
