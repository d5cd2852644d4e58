#pragma once
// A shard's traffic since it started, in total and per variable: what the
// chief's final report and its imbalance figure are made of. Counted by the
// shard actor and by its bulk connections' threads. No CAF.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "actors/protocol/protocol.hpp"

namespace troupe {

class traffic_counter {
public:
  /// A pull answered with these values (tensors, or pointers to them).
  template <class Values>
  void pulled(const std::vector<std::string>& names, const Values& values) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pulls_;
    for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
      auto bytes = bytes_of(values[i]);
      out_ += bytes;
      by_variable_[names[i]].bytes_out += bytes;
    }
  }

  /// A push received with these gradients (applied or not).
  void pushed(const std::vector<std::string>& names, const std::vector<tensor>& gradients) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pushes_;
    for (size_t i = 0; i < names.size() && i < gradients.size(); ++i) {
      in_ += gradients[i].bytes();
      by_variable_[names[i]].bytes_in += gradients[i].bytes();
    }
  }

  /// A pull of `keys` embedding rows answered with `bytes`.
  void pulled_rows(size_t keys, size_t bytes) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pulls_;
    ++row_pulls_;
    out_ += bytes;
    keys_out_ += keys;
  }

  /// A push of `keys` rows' gradients, `bytes` of them (applied or not).
  void pushed_rows(size_t keys, size_t bytes) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++pushes_;
    ++row_pushes_;
    in_ += bytes;
    keys_in_ += keys;
  }

  /// A push refused because nobody granted its step to the worker it names
  /// (a wrong grant proof, or a bulk connection opened for another worker).
  void unauthorized_push() {
    std::lock_guard<std::mutex> guard{mutex_};
    ++unauthorized_pushes_;
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
    for (auto& [name, counts] : by_variable_)
      out.variables.push_back({name, counts.bytes_in, counts.bytes_out});
    return out;
  }

private:
  static size_t bytes_of(const tensor& t) { return t.bytes(); }
  template <class Pointer>
  static size_t bytes_of(const Pointer& t) {
    return t->bytes();
  }

  mutable std::mutex mutex_;
  uint64_t pulls_ = 0, pushes_ = 0, in_ = 0, out_ = 0, unauthorized_pushes_ = 0;
  uint64_t row_pulls_ = 0, row_pushes_ = 0, keys_out_ = 0, keys_in_ = 0;
  std::map<std::string, variable_traffic> by_variable_;
};

} // namespace troupe
