#pragma once
// The set a model is scored on (the chief's evaluations, an evaluator
// task), read from its start in file order, batch by batch. A set that
// takes at most data.eval-memory-bytes is read once and kept; a larger one
// is read from its files at each evaluation, a few batches ahead on a
// thread of its own, holding those batches and one file's read buffer,
// never the set (TF's evaluators read their input the same way), so a test
// set larger than the chief's memory can be scored. Either way the batches
// and so the scores are the same.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "tensor/data/catalog.hpp"

namespace troupe {

class evaluation_set {
public:
  /// A set made in memory (the library API, tests): kept as it is.
  explicit evaluation_set(std::shared_ptr<const dataset> data);
  /// A catalog's split: read into memory now when its examples take at
  /// most `memory_bytes`, else read from its files by each reader. Throws
  /// data_error as load_all does.
  evaluation_set(std::shared_ptr<const data_split> split, uint64_t memory_bytes);

  /// Usable examples.
  uint64_t size() const { return size_; }
  /// Whether the examples are held in memory.
  bool held() const { return held_ != nullptr; }
  /// Whether examples carry real targets (else class labels).
  bool regression() const { return split_->task == objective::regression; }
  /// The split it reads (its shape, format, classes).
  const std::shared_ptr<const data_split>& split() const { return split_; }
  /// What held examples take: features and label (and target) per example.
  static uint64_t bytes_of(const data_split& split);

  /// The set from its start, `batch_size` examples a batch (the last one
  /// fewer). The set must outlive it.
  class reader {
  public:
    reader(const evaluation_set& set, size_t batch_size);
    /// Stops the read-ahead where one runs.
    ~reader();
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;

    /// The next batch into `out`; false (out empty) at the end. Throws
    /// data_error where a file no longer holds what the catalog counted.
    bool next(batch& out);

  private:
    /// The next batch, read here: copied from the held set or read from
    /// the files.
    bool read_batch(batch& out);
    /// The read-ahead thread's loop (a streamed set).
    void read_ahead();

    const evaluation_set& set_;
    size_t batch_size_;
    uint64_t done_ = 0; ///< examples read so far
    size_t file_ = 0;
    std::unique_ptr<example_source> source_;
    // A streamed set: batches read ahead, and how the reading ended.
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<batch> ready_;
    std::exception_ptr error_;
    bool ended_ = false;
    bool stopping_ = false;
    std::thread thread_;
  };

  reader read(size_t batch_size) const { return reader(*this, batch_size); }

private:
  std::shared_ptr<const data_split> split_;
  std::shared_ptr<const dataset> held_;
  uint64_t size_ = 0;
};

} // namespace troupe
