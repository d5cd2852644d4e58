#pragma once
// A bucket's key -> row index map: open addressing with linear probing over
// packed 12-byte slots, grown by doubling (a bucket is 1/1024 of a table, so
// growing one never stalls the table), erased by backward shift (no
// tombstones). It won the micro-benchmark against abseil's flat_hash_map and
// tsl's robin_map on bytes per key at equal speed (bench/embedding_table.cpp,
// docs/results.md).
#include <cstdint>
#include <cstring>
#include <memory>

#include "tensor/sparse/keys.hpp"
#include "tensor/sparse/prefetch.hpp"

namespace troupe {

class row_map {
public:
  static constexpr uint32_t no_row = UINT32_MAX;

  explicit row_map(uint64_t seed = 0) : seed_(seed) {}

  /// The slot position's hash of `key`; callers compute it once per key.
  uint64_t hash(int64_t key) const { return mix64(static_cast<uint64_t>(key) ^ seed_); }

  uint32_t find(int64_t key, uint64_t h) const {
    if (size_ == 0)
      return no_row;
    for (uint32_t i = position(h);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.row == no_row)
        return no_row;
      if (s.key == key)
        return s.row;
    }
  }

  /// Inserts a key that is not in the map.
  void insert(int64_t key, uint64_t h, uint32_t row) {
    if ((size_ + 1) * 5 > capacity() * 4)
      grow();
    place(key, h, row);
    ++size_;
  }

  /// Removes `key`; false when it was not there.
  bool erase(int64_t key, uint64_t h);

  void prefetch(uint64_t h) const {
    if (size_ != 0)
      prefetch_line(&slots_[position(h)]);
  }

  uint32_t size() const { return size_; }
  size_t bytes() const { return size_t{capacity()} * sizeof(slot); }
  /// Bytes the next insert adds: the slots it doubles to, or nothing.
  size_t growth_bytes() const {
    if ((size_ + 1) * 5 <= capacity() * 4)
      return 0;
    return size_t{capacity() == 0 ? 8 : capacity()} * sizeof(slot);
  }

  /// f(key, row) for every entry, in slot order.
  template <class F>
  void for_each(F&& f) const {
    for (uint32_t i = 0; i < capacity(); ++i)
      if (slots_[i].row != no_row)
        f(slots_[i].key, slots_[i].row);
  }

private:
#pragma pack(push, 4)
  struct slot {
    int64_t key;
    uint32_t row;
  };
#pragma pack(pop)
  static_assert(sizeof(slot) == 12);

  uint32_t capacity() const {
    return slots_ ? mask_ + 1 : 0;
  }
  // The low bits: the bucket took the top ones.
  uint32_t position(uint64_t h) const {
    return static_cast<uint32_t>(h) & mask_;
  }
  void place(int64_t key, uint64_t h, uint32_t row) {
    uint32_t i = position(h);
    while (slots_[i].row != no_row)
      i = (i + 1) & mask_;
    slots_[i] = slot{key, row};
  }
  void grow();

  std::unique_ptr<slot[]> slots_;
  uint32_t mask_ = 0;
  uint32_t size_ = 0;
  uint64_t seed_;
};

} // namespace troupe
