#include "apps/serve/model_versions.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <thread>

namespace troupe::serve {

namespace {

// Until no request holds `copy`, whose owners are the versions' member
// and the caller's copy: a request holds its model for the milliseconds it
// takes.
void wait_for_readers(const std::shared_ptr<served_model>& copy) {
  while (copy.use_count() > 2)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::shared_ptr<served_model> load(const std::string& dir, bool plain, int64_t version,
                                   std::string* refusal) {
  if (plain)
    return std::make_shared<served_model>(served_model{read_model_export(dir), 0});
  return std::make_shared<served_model>(load_version(dir, version, refusal));
}

} // namespace

model_versions::model_versions(std::string dir) : dir_(std::move(dir)) {
  plain_export_ = std::filesystem::exists(dir_ + "/model.json");
}

std::shared_ptr<const served_model> model_versions::current() const {
  std::lock_guard guard(mutex_);
  return active_;
}

uint64_t model_versions::generation() const {
  std::lock_guard guard(mutex_);
  return generation_;
}

bool model_versions::pinned() const {
  std::lock_guard guard(mutex_);
  return pinned_;
}

int64_t model_versions::newest_on_disk() const {
  return plain_export_ ? 0 : list_versions(dir_).newest();
}

void model_versions::publish(std::shared_ptr<served_model> next) {
  std::lock_guard guard(mutex_);
  standby_ = std::move(active_);
  active_ = std::move(next);
}

void model_versions::load_both(int64_t version, int64_t required, look* out) {
  std::string refusal;
  auto first = load(dir_, plain_export_, version, &refusal);
  if (!refusal.empty() && out && refused_.insert(first->version + 1).second)
    out->refused.push_back(refusal);
  if (required >= 0 && first->version != required)
    fail_checkpoint(dir_, "reaches version " + std::to_string(first->version) + ", not "
                            + std::to_string(required) + " (a delta missing or refused)");
  auto second = load(dir_, plain_export_, first->version, &refusal);
  std::lock_guard guard(mutex_);
  active_ = std::move(first);
  standby_ = std::move(second);
  ++generation_;
}

bool model_versions::step_to(int64_t version, look& out) {
  std::shared_ptr<served_model> spare;
  {
    std::lock_guard guard(mutex_);
    spare = standby_;
  }
  model_delta delta;
  try {
    delta = read_delta(delta_path(dir_, version), spare->model);
    wait_for_readers(spare);
    apply_delta(*spare, delta);
  } catch (const std::exception& e) {
    refused_.insert(version);
    out.refused.push_back(e.what());
    return false;
  }
  publish(spare);
  std::shared_ptr<served_model> behind;
  {
    std::lock_guard guard(mutex_);
    behind = standby_;
  }
  wait_for_readers(behind);
  apply_delta(*behind, delta); // checked against the same version: cannot be refused
  out.applied.push_back("delta " + std::to_string(version) + " ("
                        + std::to_string(delta.header.rows) + " rows, "
                        + std::to_string(delta.header.deleted) + " deleted, step "
                        + std::to_string(delta.header.step) + ")");
  return true;
}

model_versions::look model_versions::refresh() {
  std::lock_guard updating(update_);
  look out;
  if (!current()) {
    load_both(std::numeric_limits<int64_t>::max(), -1, &out);
    out.applied.push_back(plain_export_ ? "export " + dir_
                                        : "version " + std::to_string(current()->version));
    return out;
  }
  if (plain_export_ || pinned())
    return out;
  auto listing = list_versions(dir_);
  for (;;) {
    int64_t at = current()->version;
    bool next_delta = std::binary_search(listing.deltas.begin(), listing.deltas.end(), at + 1);
    if (next_delta && refused_.count(at + 1) == 0) {
      if (step_to(at + 1, out))
        continue;
    }
    // The chain cannot go on from here: a newer base, if any, can.
    if (listing.bases.empty() || listing.bases.back() <= at)
      return out;
    auto newest = listing.newest();
    try {
      refused_.clear();
      load_both(newest, -1, &out);
      out.applied.push_back("base " + std::to_string(listing.bases.back()) + ", then version "
                            + std::to_string(current()->version));
    } catch (const std::exception& e) {
      if (refused_.insert(-listing.bases.back()).second) // a base refused: once in the log
        out.refused.push_back(e.what());
    }
    return out;
  }
}

void model_versions::pin(int64_t version) {
  std::lock_guard updating(update_);
  if (plain_export_ && version != 0)
    fail_checkpoint(dir_, "an export directory holds version 0 only");
  load_both(version, version);
  std::lock_guard guard(mutex_);
  pinned_ = true;
}

void model_versions::follow() {
  std::lock_guard guard(mutex_);
  pinned_ = false;
}

} // namespace troupe::serve
