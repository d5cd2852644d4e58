#include "tensor/sparse/row_map.hpp"

namespace troupe {

bool row_map::erase(int64_t key, uint64_t h) {
  if (size_ == 0)
    return false;
  uint32_t i = position(h);
  while (slots_[i].key != key || slots_[i].row == no_row) {
    if (slots_[i].row == no_row)
      return false;
    i = (i + 1) & mask_;
  }
  // Backward shift: move later entries of the probe run into the hole when
  // their home position does not lie between the hole and them.
  for (uint32_t j = (i + 1) & mask_; slots_[j].row != no_row; j = (j + 1) & mask_) {
    uint32_t home = position(hash(slots_[j].key));
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].row = no_row;
  --size_;
  return true;
}

void row_map::grow() {
  uint32_t old_capacity = capacity();
  std::unique_ptr<slot[]> old = std::move(slots_);
  uint32_t capacity = old_capacity == 0 ? 8 : old_capacity * 2;
  slots_.reset(new slot[capacity]);
  for (uint32_t i = 0; i < capacity; ++i)
    slots_[i].row = no_row;
  mask_ = capacity - 1;
  for (uint32_t i = 0; i < old_capacity; ++i)
    if (old[i].row != no_row)
      place(old[i].key, hash(old[i].key), old[i].row);
}

} // namespace troupe
