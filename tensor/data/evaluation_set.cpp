#include "tensor/data/evaluation_set.hpp"

namespace troupe {

namespace {

// Batches a streamed set's reader holds ready: parsing the next while the
// model scores this one.
constexpr size_t read_ahead_batches = 2;

} // namespace

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

evaluation_set::reader::reader(const evaluation_set& set, size_t batch_size)
  : set_(set), batch_size_(batch_size) {
  if (!set_.held_)
    thread_ = std::thread([this] { read_ahead(); });
}

evaluation_set::reader::~reader() {
  if (!thread_.joinable())
    return;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

bool evaluation_set::reader::next(batch& out) {
  if (set_.held_)
    return read_batch(out);
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [this] { return !ready_.empty() || error_ || ended_; });
  if (!ready_.empty()) {
    out = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return true;
  }
  if (error_)
    std::rethrow_exception(error_);
  out.images.resize({0, set_.split_->features()});
  out.labels.clear();
  out.targets.clear();
  return false;
}

void evaluation_set::reader::read_ahead() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock{mutex_};
      changed_.wait(lock, [this] { return ready_.size() < read_ahead_batches || stopping_; });
      if (stopping_)
        return;
    }
    batch b;
    bool more = false;
    std::exception_ptr error;
    try {
      more = read_batch(b);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> guard{mutex_};
      if (more)
        ready_.push_back(std::move(b));
      else if (error)
        error_ = error;
      else
        ended_ = true;
    }
    changed_.notify_all();
    if (!more)
      return;
  }
}

bool evaluation_set::reader::read_batch(batch& out) {
  auto count = static_cast<size_t>(std::min<uint64_t>(batch_size_, set_.size_ - done_));
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
