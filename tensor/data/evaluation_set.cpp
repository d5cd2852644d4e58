#include "tensor/data/evaluation_set.hpp"

namespace troupe {

evaluation_set::evaluation_set(std::shared_ptr<const dataset> data)
  : split_(split_in_memory(data, "test set")), held_(std::move(data)), size_(held_->size()) {
}

evaluation_set::evaluation_set(std::shared_ptr<const data_split> split, uint64_t memory_bytes)
  : split_(std::move(split)), size_(split_->usable_records()) {
  if (split_->memory)
    held_ = split_->memory;
  else if (bytes_of(*split_) <= memory_bytes)
    held_ = std::make_shared<const dataset>(load_all(split_));
}

uint64_t evaluation_set::bytes_of(const data_split& split) {
  uint64_t per_example = static_cast<uint64_t>(split.features()) * sizeof(float) + sizeof(int32_t)
                         + (split.task == objective::regression ? sizeof(float) : 0);
  return split.usable_records() * per_example;
}

evaluation_set::reader::reader(const evaluation_set& set) : set_(set) {
}

bool evaluation_set::reader::next(size_t count, batch& out) {
  count = static_cast<size_t>(std::min<uint64_t>(count, set_.size_ - done_));
  if (set_.held_) {
    copy_batch(*set_.held_, done_, count, out);
    done_ += count;
    return count > 0;
  }
  auto& split = *set_.split_;
  auto features = split.features();
  out.images.resize({static_cast<int64_t>(count), features});
  out.labels.resize(count);
  out.targets.resize(split.task == objective::regression ? count : 0);
  size_t row = 0;
  while (row < count) {
    if (!source_) {
      if (file_ == split.files.size())
        throw data_error(split.name + ": " + std::to_string(done_ + row)
                         + " usable records read, but " + std::to_string(set_.size_)
                         + " counted: a file changed during the run, or features overflow once "
                           "normalised ("
                         + split.norm.describe() + ")");
      source_ = std::make_unique<example_source>(set_.split_, file_++);
    }
    float target = 0;
    if (!source_->next(out.images.data() + row * features, out.labels[row], target)) {
      source_.reset();
      continue;
    }
    if (!out.targets.empty())
      out.targets[row] = target;
    ++row;
  }
  done_ += count;
  return count > 0;
}

} // namespace troupe
