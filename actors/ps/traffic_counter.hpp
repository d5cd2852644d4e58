#pragma once
// A shard's traffic since it started, in total and per variable: what the
// chief's final report and its imbalance figure are made of. Counted by the
// shard's service, on the shard's thread and its bulk connections'. No CAF.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "actors/metrics/task_metrics.hpp"
#include "actors/protocol/messages.hpp"

namespace troupe {

class traffic_counter {
public:
  /// Counts for shard `shard`, in the process's metrics too.
  explicit traffic_counter(int32_t shard) : metrics_(metrics::shard_metrics::make(shard)) {}

  /// A pull answered with these values (pointers to them) and `keys` rows
  /// of `row_bytes`.
  template <class Values>
  void pulled(const std::vector<std::string>& names, const Values& values, size_t keys,
              size_t row_bytes) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pulls_;
    uint64_t sent = 0;
    for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
      auto bytes = values[i]->bytes();
      sent += bytes;
      by_variable_[names[i]].bytes_out += bytes;
    }
    metrics_.pulls.add();
    if (keys > 0) {
      ++row_pulls_;
      sent += row_bytes;
      keys_out_ += keys;
      metrics_.row_pulls.add();
      metrics_.keys_pulled.add(keys);
    }
    out_ += sent;
    metrics_.sent_bytes.add(sent);
  }

  /// A push received (applied or not): its gradients and every table's rows.
  void pushed(const step_push& push) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pushes_;
    uint64_t received = 0;
    for (size_t i = 0; i < push.names.size() && i < push.gradients.size(); ++i) {
      received += push.gradients[i].bytes();
      by_variable_[push.names[i]].bytes_in += push.gradients[i].bytes();
    }
    size_t keys = 0;
    for (auto& rows : push.tables) {
      keys += rows.keys.size();
      received += rows.grads.bytes();
    }
    in_ += received;
    metrics_.pushes.add();
    metrics_.received_bytes.add(received);
    if (keys > 0) {
      ++row_pushes_;
      keys_in_ += keys;
      metrics_.row_pushes.add();
      metrics_.keys_pushed.add(keys);
    }
  }

  /// A push of a step applied already, not applied again.
  void repeated_push() {
    std::lock_guard<std::mutex> guard{mutex_};
    ++repeated_pushes_;
    metrics_.repeated_pushes.add();
  }

  /// A push refused because nobody granted its step to the worker it names
  /// (a wrong grant proof, or a bulk connection opened for another worker).
  void unauthorized_push() {
    std::lock_guard<std::mutex> guard{mutex_};
    ++unauthorized_pushes_;
    metrics_.refused_pushes.add();
  }

  /// The reply to the chief's stats request; variables by name.
  shard_traffic report(int32_t shard, uint64_t bytes_held) const {
    std::lock_guard<std::mutex> guard{mutex_};
    shard_traffic out; // updates: the store's
    out.shard = shard;
    out.bytes_held = bytes_held;
    out.bytes_in = in_;
    out.bytes_out = out_;
    out.pulls = pulls_;
    out.pushes = pushes_;
    out.unauthorized_pushes = unauthorized_pushes_;
    out.row_pulls = row_pulls_;
    out.row_pushes = row_pushes_;
    out.keys_pulled = keys_out_;
    out.keys_pushed = keys_in_;
    out.repeated_pushes = repeated_pushes_;
    for (auto& [name, counts] : by_variable_)
      out.variables.push_back({name, counts.bytes_in, counts.bytes_out});
    return out;
  }

private:
  metrics::shard_metrics metrics_;
  mutable std::mutex mutex_;
  uint64_t pulls_ = 0, pushes_ = 0, in_ = 0, out_ = 0, unauthorized_pushes_ = 0;
  uint64_t row_pulls_ = 0, row_pushes_ = 0, keys_out_ = 0, keys_in_ = 0, repeated_pushes_ = 0;
  std::map<std::string, variable_traffic> by_variable_;
};

} // namespace troupe
