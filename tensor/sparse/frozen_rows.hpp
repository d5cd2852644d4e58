#pragma once
// A bucket's part of a table's frozen view (a checkpoint reading the rows
// while pushes go on): the rows that were there at the freeze all had a
// last update below `unchanged_below`, so a row at or past it changed since
// (and was copied then) or came later. Each row the freeze saw is copied
// once, before its first change or removal. Not thread-safe: the bucket's
// lock guards it.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace troupe {

class frozen_rows {
public:
  /// stride: floats a row; payload: those before its counters.
  frozen_rows(uint64_t generation, uint64_t unchanged_below, uint32_t stride, uint32_t payload)
    : generation_(generation), unchanged_below_(unchanged_below), stride_(stride),
      payload_(payload) {}

  uint64_t generation() const noexcept { return generation_; }
  /// `row` of `key` is about to change or go: kept as it was, where the
  /// freeze saw it and it was not kept already.
  void keep(int64_t key, const float* row);
  /// `key`'s row as frozen: its copy, or `live` (its row now; null: none)
  /// where unchanged since; null where the view does not hold the key.
  const float* row(int64_t key, const float* live) const;
  size_t copies() const noexcept { return copied_.size(); }

private:
  bool seen_by_the_freeze(const float* row) const;

  uint64_t generation_;
  uint64_t unchanged_below_;
  uint32_t stride_;
  uint32_t payload_;
  std::unordered_map<int64_t, uint32_t> copied_; ///< key -> its row in copies_
  std::vector<float> copies_;                    ///< stride_ floats a row
};

} // namespace troupe
