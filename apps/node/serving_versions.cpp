#include "apps/node/serving_versions.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/export/delta_series.hpp"

namespace troupe::node {

serving_versions::serving_versions(const node_setup& setup)
  : log_dir_(setup.train.checkpoint.log_dir), interval_(setup.train.checkpoint.delta_interval) {
  auto& ckpt = setup.train.checkpoint;
  if (interval_.count() <= 0 || log_dir_.empty())
    return;
  if (setup.train.model == model_kind::declared || setup.train.model == model_kind::synthetic) {
    spdlog::warn("export.delta-interval: model {} is not exported, so no serving versions are "
                 "written; its checkpoints are in {}",
                 name_of(setup.train.model), log_dir_);
    return;
  }
  series_ = std::make_unique<delta_series>(ckpt.serving_dir, log_dir_ + "/model.json",
                                           ckpt.base_every);
  try {
    spdlog::info("{}", series_->resume(log_dir_));
  } catch (const std::exception& e) {
    spdlog::warn("serving versions: could not resume from {} ({}); the next is a base",
                 ckpt.serving_dir, e.what());
    series_ = std::make_unique<delta_series>(ckpt.serving_dir, log_dir_ + "/model.json",
                                             ckpt.base_every);
  }
  thread_ = std::thread([this] { run(); });
}

serving_versions::~serving_versions() {
  finish();
}

void serving_versions::finish() {
  if (!thread_.joinable())
    return;
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  look(); // the final checkpoint
}

void serving_versions::run() {
  // A look four times an interval (at most a second apart); a version at
  // most every half interval, so checkpoints a little early or late each
  // still make one.
  auto poll = std::min<std::chrono::milliseconds>(interval_ / 4, std::chrono::seconds(1));
  std::unique_lock guard(mutex_);
  while (!wake_.wait_for(guard, poll, [this] { return stopping_; })) {
    if (std::chrono::steady_clock::now() - last_version_ < interval_ / 2)
      continue;
    guard.unlock();
    look();
    guard.lock();
  }
}

void serving_versions::look() {
  auto latest = checkpoint_dir(log_dir_).latest();
  if (!latest)
    return;
  try {
    auto line = series_->add(*latest);
    if (!line.empty()) {
      last_version_ = std::chrono::steady_clock::now();
      spdlog::info("serving {}", line);
    }
  } catch (const std::exception& e) {
    // Removed by checkpoint.keep while read, a full disk: the next
    // checkpoint makes the next version (a base).
    spdlog::warn("serving versions: no version from {}: {}", *latest, e.what());
  }
}

} // namespace troupe::node
