#include "tensor/data/stream.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "tensor/data/follow_reader.hpp"

namespace troupe {

std::vector<segment> share_of(const data_split& split, size_t index, size_t count) {
  if (count == 0 || index >= count)
    throw troupe_error("worker index " + std::to_string(index) + " out of range for "
                       + std::to_string(count) + " workers");
  std::vector<segment> out;
  auto& files = split.files;
  if (files.size() >= count) {
    for (size_t f = index; f < files.size(); f += count)
      out.push_back({f, 0, files[f].records});
  } else {
    // Fewer files than workers: the records of all files end to end, cut
    // into `count` even ranges.
    uint64_t total = 0;
    for (auto& f : files)
      total += f.records;
    uint64_t first = total * index / count, end = total * (index + 1) / count;
    uint64_t base = 0;
    for (size_t f = 0; f < files.size(); ++f) {
      uint64_t lo = std::max(first, base), hi = std::min(end, base + files[f].records);
      if (lo < hi)
        out.push_back({f, lo - base, hi - base});
      base += files[f].records;
    }
  }
  if (out.empty())
    throw data_error("worker " + std::to_string(index) + " of " + std::to_string(count)
                     + " gets no examples from the " + split.name + " ("
                     + std::to_string(split.usable_records()) + " records in "
                     + std::to_string(files.size()) + " files); use fewer workers");
  return out;
}

share_reader::share_reader(std::shared_ptr<const data_split> split, const stream_options& options)
  : split_(std::move(split)), options_(options),
    features_(static_cast<size_t>(split_->features())) {
  adopt_share(options.share.count > 0 ? options.share : data_share{options.index, options.count});
  if (!resident_)
    start_epoch(); // a resident share is read on first use, on the reader thread
}

void share_reader::adopt_share(data_share share) {
  segments_ = share_of(*split_, share.rank, share.count);
  share_ = share;
  share_size_ = 0;
  for (auto& s : segments_) {
    auto& f = split_->files[s.file];
    auto records = s.end - s.first;
    // Bad records are counted per file: a range gets its part of them.
    auto bad = f.records == 0 ? 0 : f.bad * records / f.records;
    share_size_ += records - std::min(records, bad);
  }
  uint64_t share_records = 0; // an upper bound on the share's usable examples
  for (auto& s : segments_)
    share_records += s.end - s.first;
  auto bytes_per_example = (features_ + 2) * sizeof(float);
  buffer_examples_ = options_.shuffle_buffer;
  if (buffer_examples_ == 0)
    buffer_examples_ = share_records * bytes_per_example <= auto_shuffle_bytes
                         ? static_cast<size_t>(share_records)
                         : auto_shuffle_examples;
  resident_ = options_.shuffle && buffer_examples_ >= share_records
              && share_records <= std::numeric_limits<uint32_t>::max();
  loaded_ = false;
  source_.reset();
  filled_ = 0;
  if (resident_) {
    buffer_examples_ = static_cast<size_t>(share_records);
    return;
  }
  if (options_.shuffle) {
    buffer_.resize(buffer_examples_ * features_);
    labels_.resize(buffer_examples_);
    targets_.resize(buffer_examples_);
  }
}

void share_reader::set_next_share(data_share share) {
  share_of(*split_, share.rank, share.count); // throws where it would be empty
  std::lock_guard<std::mutex> guard(next_share_mutex_);
  next_share_ = share;
}

void share_reader::begin_next_epoch() {
  ++epoch_;
  std::optional<data_share> next;
  {
    std::lock_guard<std::mutex> guard(next_share_mutex_);
    next.swap(next_share_);
  }
  if (next && *next != share_) {
    adopt_share(*next);
    if (resident_)
      load_share();
  }
  start_epoch();
}

// The whole share, once, in file order (bad records skipped as the catalog says).
void share_reader::load_share() {
  buffer_.resize(buffer_examples_ * features_);
  labels_.resize(buffer_examples_);
  targets_.resize(buffer_examples_);
  order_ = segments_;
  next_segment_ = 0;
  source_.reset();
  filled_ = 0;
  while (filled_ < buffer_examples_
         && read_example(buffer_.data() + filled_ * features_, labels_[filled_], targets_[filled_]))
    ++filled_;
  source_.reset();
  if (filled_ == 0)
    throw data_error("worker " + std::to_string(options_.index) + ": its share of the "
                     + split_->name + " holds no usable example");
  buffer_.resize(filled_ * features_);
  buffer_.shrink_to_fit();
  share_size_ = filled_;
  loaded_ = true;
}

void share_reader::take_resident(float* features, int32_t& label, float& target) {
  if (!loaded_) {
    load_share();
    start_epoch();
  }
  if (offset_ == filled_) {
    begin_next_epoch();
    if (!resident_) { // the new share is too large to keep
      take_example(features, label, target);
      return;
    }
  }
  auto pick = permutation_[offset_++];
  std::memcpy(features, buffer_.data() + size_t{pick} * features_, features_ * sizeof(float));
  label = labels_[pick];
  target = targets_[pick];
}

void share_reader::seed_rng(uint64_t salt) {
  std::seed_seq seq{
    static_cast<uint32_t>(options_.seed),  static_cast<uint32_t>(options_.seed >> 32),
    static_cast<uint32_t>(options_.index), static_cast<uint32_t>(epoch_),
    static_cast<uint32_t>(epoch_ >> 32),   static_cast<uint32_t>(salt)};
  rng_.seed(seq);
}

void share_reader::start_epoch() {
  offset_ = 0;
  if (resident_) {
    if (!loaded_)
      return;
    permutation_.resize(filled_);
    std::iota(permutation_.begin(), permutation_.end(), uint32_t{0});
    seed_rng(3);
    std::shuffle(permutation_.begin(), permutation_.end(), rng_);
    return;
  }
  order_ = segments_;
  if (options_.shuffle) {
    seed_rng(1);
    std::shuffle(order_.begin(), order_.end(), rng_);
    seed_rng(2);
  }
  next_segment_ = 0;
  source_.reset();
  filled_ = 0;
  if (!options_.shuffle)
    return;
  while (filled_ < buffer_examples_
         && read_example(buffer_.data() + filled_ * features_, labels_[filled_], targets_[filled_]))
    ++filled_;
}

bool share_reader::read_example(float* features, int32_t& label, float& target) {
  for (;;) {
    if (source_ && source_->position() < source_end_ && source_->next(features, label, target)) {
      if (source_->position() <= source_end_)
        return true;
      // The record that ended the segment's range belongs to the next share.
    }
    if (next_segment_ == order_.size())
      return false;
    auto& s = order_[next_segment_++];
    source_.emplace(split_, s.file);
    if (s.first > 0)
      source_->seek(s.first);
    source_end_ = s.end;
  }
}

void share_reader::take_example(float* features, int32_t& label, float& target) {
  if (resident_) {
    take_resident(features, label, target);
    return;
  }
  for (int pass = 0; pass < 3; ++pass) {
    if (!options_.shuffle) {
      if (read_example(features, label, target)) {
        ++offset_;
        return;
      }
    } else if (filled_ > 0) {
      // tf.data's shuffle: a random example of the buffer leaves, the next
      // one read takes its place (the last one when the share is exhausted).
      size_t pick = static_cast<size_t>(rng_() % filled_);
      std::memcpy(features, buffer_.data() + pick * features_, features_ * sizeof(float));
      label = labels_[pick];
      target = targets_[pick];
      if (!read_example(buffer_.data() + pick * features_, labels_[pick], targets_[pick])) {
        --filled_;
        if (pick != filled_) {
          std::memcpy(buffer_.data() + pick * features_, buffer_.data() + filled_ * features_,
                      features_ * sizeof(float));
          labels_[pick] = labels_[filled_];
          targets_[pick] = targets_[filled_];
        }
      }
      ++offset_;
      return;
    }
    begin_next_epoch(); // the share is exhausted
    if (resident_) {    // the new share is small enough to keep
      take_resident(features, label, target);
      return;
    }
  }
  throw data_error("worker " + std::to_string(options_.index) + ": its share of the " + split_->name
                   + " holds no usable example");
}

void size_batch(batch& out, size_t n, const data_split& split) {
  out.images.resize({static_cast<int64_t>(n), split.features()});
  out.labels.resize(n);
  out.targets.resize(split.task == objective::regression ? n : 0);
}

void share_reader::next_batch(batch& out) {
  auto n = options_.batch_size;
  size_batch(out, n, *split_);
  bool regression = split_->task == objective::regression;
  float unused = 0;
  for (size_t i = 0; i < n; ++i)
    take_example(out.images.data() + i * features_, out.labels[i],
                 regression ? out.targets[i] : unused);
}

void share_reader::seek(stream_position position) {
  if (position.share.count != 0 && position.share != share_)
    adopt_share(position.share);
  epoch_ = position.epoch;
  if (resident_) {
    if (!loaded_)
      load_share();
    start_epoch();
    if (position.offset > filled_)
      throw data_error("worker " + std::to_string(options_.index) + ": data position "
                       + std::to_string(position.offset) + " lies beyond its share of "
                       + std::to_string(filled_) + " examples (another data set?)");
    offset_ = position.offset;
    return;
  }
  start_epoch();
  std::vector<float> discard(features_);
  int32_t label;
  float target;
  for (uint64_t i = 0; i < position.offset; ++i) {
    take_example(discard.data(), label, target);
    if (epoch_ != position.epoch)
      throw data_error("worker " + std::to_string(options_.index) + ": data position "
                       + std::to_string(position.offset) + " lies beyond its share of "
                       + std::to_string(share_size_) + " examples (another data set?)");
  }
}

namespace {

// A followed directory is always read ahead: ready() tells the worker
// whether a batch is there, without waiting for files.
stream_options reading_options(const data_split& split, stream_options options) {
  if (!split.follow.empty())
    options.prefetch = std::max<size_t>(options.prefetch, 1);
  return options;
}

std::unique_ptr<batch_reader> make_reader(std::shared_ptr<const data_split> split,
                                          const stream_options& options) {
  if (!split->follow.empty())
    return std::make_unique<follow_reader>(std::move(split), options);
  return std::make_unique<share_reader>(std::move(split), options);
}

} // namespace

example_stream::example_stream(std::shared_ptr<const data_split> split,
                               const stream_options& options)
  : split_(std::move(split)), options_(reading_options(*split_, options)),
    reader_(make_reader(split_, options_)), share_size_(reader_->share_size()),
    buffer_examples_(reader_->buffer_examples()), resident_(reader_->resident()),
    position_(reader_->position()) {
  start_reader();
}

example_stream::~example_stream() {
  stop_reader();
}

void example_stream::start_reader() {
  if (options_.prefetch == 0)
    return;
  reader_->resume();
  stopping_ = false;
  thread_ = std::thread([this] { run_reader(); });
}

void example_stream::stop_reader() {
  if (!thread_.joinable())
    return;
  reader_->stop(); // a followed directory's reader may be waiting for files
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  for (auto& p : ready_)
    spare_.push_back(std::move(p.examples));
  ready_.clear();
}

void example_stream::run_reader() {
  for (;;) {
    batch next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || ready_.size() < options_.prefetch; });
      if (stopping_)
        return;
      if (!spare_.empty()) {
        next = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    prepared item;
    try {
      reader_->next_batch(next);
      item.after = reader_->position();
    } catch (...) {
      item.error = std::current_exception();
    }
    item.examples = std::move(next);
    bool failed = static_cast<bool>(item.error);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      ready_.push_back(std::move(item));
    }
    changed_.notify_all();
    if (failed)
      return; // next_batch rethrows; nothing after a failed read is trusted
  }
}

bool example_stream::ready() {
  if (options_.prefetch == 0)
    return true;
  std::lock_guard<std::mutex> guard(mutex_);
  return !ready_.empty();
}

void example_stream::next_batch(batch& out) {
  if (options_.prefetch == 0) {
    reader_->next_batch(out);
    position_ = reader_->position();
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty(); });
  auto item = std::move(ready_.front());
  ready_.pop_front();
  if (item.error)
    std::rethrow_exception(item.error);
  std::swap(out, item.examples);
  spare_.push_back(std::move(item.examples));
  position_ = item.after;
  lock.unlock();
  changed_.notify_all();
}

void example_stream::seek(stream_position position) {
  stop_reader();
  reader_->seek(position);
  position_ = reader_->position();
  share_size_ = reader_->share_size();
  start_reader();
}

} // namespace troupe
