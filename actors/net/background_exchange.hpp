#pragma once
// Runs bulk exchanges (complete_all) on a thread of its own, so that a
// worker computes while they move: with train.pull-ahead, a step's pushes,
// each followed on its link by the pull of a later step's values, run this
// way while the next step computes. The links belong to the caller, who
// must not touch them between start() and wait().
// Free of CAF.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/net/bulk_client.hpp"

namespace troupe {

class background_exchange {
public:
  background_exchange();
  /// Cancels what runs and joins the thread.
  ~background_exchange();
  background_exchange(const background_exchange&) = delete;
  background_exchange& operator=(const background_exchange&) = delete;

  /// Runs complete_all(links, now + within) on the thread. Waits first for
  /// a run still under way.
  void start(std::vector<bulk_link*> links, std::chrono::milliseconds within);
  /// Blocks until the last run completed (at once when none is under way).
  void wait();
  /// Ends a run under way at once: its links' sockets are shut down, so
  /// their exchanges fail and the links are broken. Then waits.
  void cancel();

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bulk_link*> links_;
  std::chrono::milliseconds within_{0};
  bool running_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace troupe
