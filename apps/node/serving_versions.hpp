#pragma once
// The chief's serving versions (export.delta-interval): a thread beside the
// run that looks for a newer checkpoint in the log directory and turns it
// into the next version of the serving directory, a delta or a base
// (tensor/export/delta_series.hpp). It reads checkpoint files only: the run
// never waits on it, and its errors are logged, never fatal (the next
// version is then a base). No CAF.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "config/node/node_config.hpp"

namespace troupe {
class delta_series;
}

namespace troupe::node {

class serving_versions {
public:
  /// Starts the thread where setup's export.delta-interval is set and the
  /// model can be exported (not a declared or synthetic one).
  explicit serving_versions(const node_setup& setup);
  /// finish(), where not done yet.
  ~serving_versions();
  serving_versions(const serving_versions&) = delete;
  serving_versions& operator=(const serving_versions&) = delete;

  /// A last look (the run's final checkpoint becomes a version), then the
  /// thread ends.
  void finish();

private:
  void run();
  /// Writes a version from the newest checkpoint if it is new; logs.
  void look();

  std::string log_dir_;
  std::chrono::milliseconds interval_{0};
  std::unique_ptr<delta_series> series_;
  std::chrono::steady_clock::time_point last_version_{};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace troupe::node
