#pragma once
// How a worker picks its data: worker `index` of `count` reads its share of
// the training set, the examples i with i % count == index, in an order
// reshuffled each epoch from (seed, index, epoch), or in index order when
// shuffle is off (fixed data order, for equivalence checks). Every example
// is read by exactly one worker per epoch. ("Share" is the word for a
// worker's part of the data; a shard is always a ps shard, and a slice a
// part of a variable.)
#include <cstdint>
#include <vector>

#include "tensor/data/dataset.hpp"

namespace troupe {

class example_sampler {
public:
  example_sampler(size_t examples, size_t index, size_t count, uint64_t seed, bool shuffle = true);

  /// Copies the next `batch_size` examples of this share into `out`,
  /// starting a new, reshuffled epoch when the share is exhausted.
  void next_batch(const dataset& data, size_t batch_size, batch& out);

  size_t epoch() const noexcept { return epoch_; }
  /// The next example's place within this epoch's share.
  size_t position() const noexcept { return position_; }
  /// Continues where a checkpoint left off: the order of `epoch`, from
  /// `position`. Throws data_error for a position beyond the share.
  void seek(size_t epoch, size_t position);
  /// Examples in this worker's share.
  size_t share_size() const noexcept { return order_.size(); }

private:
  void reshuffle();

  std::vector<size_t> order_;
  size_t position_ = 0;
  size_t epoch_ = 0;
  uint64_t seed_;
  size_t index_;
  bool shuffle_;
};

} // namespace troupe
