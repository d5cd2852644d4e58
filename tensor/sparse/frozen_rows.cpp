#include "tensor/sparse/frozen_rows.hpp"

#include "tensor/sparse/row_layout.hpp"

namespace troupe {

bool frozen_rows::seen_by_the_freeze(const float* row) const {
  return row_layout::counters_of(row, payload_).last_update < unchanged_below_;
}

void frozen_rows::keep(int64_t key, const float* row) {
  if (!seen_by_the_freeze(row))
    return;
  auto [at, first] = copied_.try_emplace(key, static_cast<uint32_t>(copies_.size() / stride_));
  if (first)
    copies_.insert(copies_.end(), row, row + stride_);
}

const float* frozen_rows::row(int64_t key, const float* live) const {
  if (auto copy = copied_.find(key); copy != copied_.end())
    return copies_.data() + size_t{copy->second} * stride_;
  return live && seen_by_the_freeze(live) ? live : nullptr;
}

} // namespace troupe
