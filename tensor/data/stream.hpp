#pragma once
// A worker's part of the training set: which records it reads (share_of:
// by file first, as tf.data's shard does, else by record ranges), in what
// order, read ahead by a background thread into a bounded queue of batches.
// Two ways, chosen by the buffer's size against the share's:
// - a share that fits the shuffle buffer is read once and kept: each epoch
//   is a uniform permutation of it (what tf.data's shuffle gives with a
//   buffer as large as the data), and no epoch reads the files again;
// - a larger share is streamed: segments reshuffled each epoch, records
//   through the bounded shuffle buffer. Memory: the buffer, the prefetched
//   batches and one read buffer per open file, never the data set.
// Both follow from the seed alone. ("Share" is a worker's part of the data;
// a shard is always a ps shard.) Elastic membership changes a worker's
// share (rank of count) only where an epoch begins: set_next_share.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "tensor/data/catalog.hpp"

namespace troupe {

/// Records [first, end) of file `file` of a split.
struct segment {
  size_t file = 0;
  uint64_t first = 0, end = 0;
};

/// Worker `index` of `count`: files index, index + count, ... where there
/// are at least as many files as workers, else an even range of the records
/// of all files taken end to end. Every record is in exactly one share.
/// Throws data_error where the share would be empty.
std::vector<segment> share_of(const data_split& split, size_t index, size_t count);

/// Which part of the data a worker reads in an epoch: share `rank` of
/// `count` (share_of). Fixed membership: its index of the listed workers.
/// count 0: not said (a seek keeps the share in force).
struct data_share {
  size_t rank = 0, count = 0;
  bool operator==(const data_share& o) const { return rank == o.rank && count == o.count; }
  bool operator!=(const data_share& o) const { return !(*this == o); }
};

/// Where a worker is in its data: its epoch, the share it reads in that
/// epoch and the examples it has taken from it. The supervisor checkpoints
/// this; the order within the epoch follows from the seed, so it is all a
/// restart needs.
struct stream_position {
  uint64_t epoch = 0;
  uint64_t offset = 0;
  data_share share;
};

/// data.shuffle-buffer = 0: the whole share when it takes at most this
/// many bytes, else a buffer of auto_shuffle_examples.
constexpr uint64_t auto_shuffle_bytes = uint64_t{256} << 20;
constexpr size_t auto_shuffle_examples = 10000;

struct stream_options {
  size_t index = 0; ///< the worker's index: its seed, and its share unless `share` says
  size_t count = 1; ///<   (share `index` of `count`)
  data_share share; ///< the share to read first (elastic membership); count 0: as above
  uint64_t seed = 42;
  bool shuffle = true;       ///< off: the share in file order (equivalence checks)
  size_t shuffle_buffer = 0; ///< examples; 0: automatic (auto_shuffle_bytes)
  size_t prefetch = 4;       ///< batches read ahead by a background thread (0: none)
  size_t batch_size = 100;
};

/// Sizes `out` for `n` examples of `split` (images, labels, and targets
/// for regression), keeping its storage where it fits.
void size_batch(batch& out, size_t n, const data_split& split);

/// What example_stream reads batches from, on its reader thread: a share
/// of files that end (share_reader), or a directory followed as files
/// arrive (follow_reader.hpp).
class batch_reader {
public:
  virtual ~batch_reader() = default;
  /// Fills `out` with the next batch_size examples.
  virtual void next_batch(batch& out) = 0;
  /// Restarts at `position`.
  virtual void seek(stream_position position) = 0;
  virtual stream_position position() const = 0;
  /// The share to read from the next epoch on (elastic membership); may be
  /// called from any thread. Throws data_error where it cannot be.
  virtual void set_next_share(data_share share) = 0;
  /// Usable examples in the share (0: not known, a followed directory).
  virtual uint64_t share_size() const = 0;
  /// Whether the share is kept in memory.
  virtual bool resident() const = 0;
  /// Examples the shuffle buffer holds.
  virtual size_t buffer_examples() const = 0;
  /// From another thread: a next_batch waiting for data gives up
  /// (throws stream_stopped). Readers of files that end never wait.
  virtual void stop() {}
  /// Waits for data again after stop().
  virtual void resume() {}
};

/// next_batch gave up waiting for data: the stream is being stopped.
struct stream_stopped : troupe_error {
  stream_stopped() : troupe_error("the data stream was stopped") {}
};

/// Reads the share, example by example, in the seed's order. Single-threaded;
/// example_stream runs it on its reader thread.
class share_reader final : public batch_reader {
public:
  share_reader(std::shared_ptr<const data_split> split, const stream_options& options);
  /// Fills `out` with the next batch_size examples (crossing into the next
  /// epoch where the share ends).
  void next_batch(batch& out) override;
  /// Restarts at `position`: its share, the epoch's order replayed up to
  /// its offset.
  void seek(stream_position position) override;
  stream_position position() const noexcept override { return {epoch_, offset_, share_}; }
  /// Throws data_error where the share would be empty.
  void set_next_share(data_share share) override;
  /// Bad records in a range share are estimated from their file's count.
  uint64_t share_size() const noexcept override { return share_size_; }
  /// Whether the share fits the shuffle buffer.
  bool resident() const noexcept override { return resident_; }
  /// The share's examples, when resident.
  size_t buffer_examples() const noexcept override { return buffer_examples_; }

private:
  // Reads `share` from now on: its segments, size and buffers.
  void adopt_share(data_share share);
  // The share ended: the next epoch begins, in the share set for it.
  void begin_next_epoch();
  void start_epoch();
  void load_share();
  void take_resident(float* features, int32_t& label, float& target);
  // The next example of the epoch into slot storage; false when the share's
  // files are exhausted.
  bool read_example(float* features, int32_t& label, float& target);
  void take_example(float* features, int32_t& label, float& target);
  void seed_rng(uint64_t salt);

  std::shared_ptr<const data_split> split_;
  stream_options options_;
  size_t features_;
  data_share share_;
  std::mutex next_share_mutex_; // set_next_share comes from the worker's thread
  std::optional<data_share> next_share_;
  std::vector<segment> segments_, order_;
  uint64_t share_size_ = 0;
  uint64_t epoch_ = 0, offset_ = 0;
  size_t next_segment_ = 0;
  std::optional<example_source> source_;
  uint64_t source_end_ = 0;
  std::mt19937_64 rng_;
  // The shuffle buffer: `filled_` examples in `buffer_`, `labels_` and
  // (regression) `targets_`.
  std::vector<float> buffer_;
  std::vector<int32_t> labels_;
  std::vector<float> targets_;
  size_t filled_ = 0;
  size_t buffer_examples_ = 0;
  // Resident: the share in file order in the vectors above (loaded_
  // examples, read on first use) and this epoch's permutation of them.
  bool resident_ = false;
  bool loaded_ = false;
  std::vector<uint32_t> permutation_;
};

/// share_reader behind a bounded queue filled by a background thread, so
/// that compute does not wait on the disk. An error on the reader thread
/// (a bad record under fail) is rethrown by next_batch.
class example_stream {
public:
  example_stream(std::shared_ptr<const data_split> split, const stream_options& options);
  ~example_stream();
  example_stream(const example_stream&) = delete;
  example_stream& operator=(const example_stream&) = delete;

  /// The next batch (waits for the reader where it is behind).
  void next_batch(batch& out);
  /// Whether next_batch would not wait: a batch is prepared (a followed
  /// directory may have nothing new for a while).
  bool ready();
  /// Whether it follows a directory (follow_reader.hpp).
  bool follows() const noexcept { return !split_->follow.empty(); }
  /// After the last batch next_batch returned.
  stream_position position() const noexcept { return position_; }
  void seek(stream_position position);
  /// From the next epoch the reader begins on (elastic membership).
  void set_next_share(data_share share) { reader_->set_next_share(share); }
  /// Of the share read at construction or the last seek.
  uint64_t share_size() const noexcept { return share_size_; }
  /// What the reader holds (fixed at construction): the buffer's examples,
  /// and whether that is the whole share.
  size_t buffer_examples() const noexcept { return buffer_examples_; }
  bool resident() const noexcept { return resident_; }
  uint64_t total_examples() const noexcept { return split_->usable_records(); }
  const data_split& split() const noexcept { return *split_; }

private:
  struct prepared {
    batch examples;
    stream_position after;
    std::exception_ptr error;
  };
  void start_reader();
  void stop_reader();
  void run_reader();

  std::shared_ptr<const data_split> split_;
  stream_options options_;
  std::unique_ptr<batch_reader> reader_;
  uint64_t share_size_;
  size_t buffer_examples_;
  bool resident_;
  stream_position position_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<prepared> ready_;
  std::vector<batch> spare_; // buffers handed back by next_batch, reused
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace troupe
