#pragma once
// The key slots of a batch of categorical examples (key_layout), read the
// same way by every model with an embedding table.
#include <cstdint>
#include <vector>

#include "tensor/data/dataset.hpp"
#include "tensor/data/key_layout.hpp"
#include "tensor/sparse/keys.hpp"

namespace troupe {

/// f(example, key, weight, field) for every used slot of `b`, example by
/// example, field by field: the order of a batch's key occurrences.
template <class F>
void for_each_key(const key_layout& keys, const batch& b, F&& f) {
  auto width = static_cast<size_t>(keys.width());
  for (size_t e = 0; e < b.size(); ++e) {
    const float* slots = b.images.data() + e * width + keys.dense;
    for (int64_t s = 0; s < keys.slots(); ++s) {
      const float* slot = slots + s * key_layout::floats_per_key;
      int64_t key = unpack_key(slot);
      if (key >= 0)
        f(e, key, slot[3], static_cast<uint32_t>(s / keys.keys_per_field));
    }
  }
}

/// The table's keys `b` looks up, occurrence by occurrence, into `ids`: the
/// data's keys, or their rows in a fixed-size table (`vocabulary` not
/// empty).
inline void table_keys_of(const key_layout& keys, const fixed_vocabulary& vocabulary,
                          const batch& b, std::vector<int64_t>& ids) {
  ids.clear();
  if (vocabulary.empty())
    for_each_key(keys, b, [&](size_t, int64_t key, float, uint32_t) { ids.push_back(key); });
  else
    for_each_key(keys, b, [&](size_t, int64_t key, float, uint32_t field) {
      ids.push_back(vocabulary.row_of(key, field));
    });
}

} // namespace troupe
