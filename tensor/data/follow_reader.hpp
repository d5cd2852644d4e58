#pragma once
// A directory read as files arrive in it (data.follow): training on a
// stream of events without end. A producer writes each file under a name
// that says it is not done (starting with '.', or ending in .tmp, .part or
// .inprogress) and renames it into place when complete (the convention of
// Flink's and Spark's file sinks). A file's sequence number is the number
// its name's digits make, read left to right (part-000123.tsv: 123;
// 20261207-1005.tsv: 202612071005); files are read in that order, each by
// one worker (a hash of the number picks the share), so the workers share
// the stream without overlap or loss. A worker's position is the number of
// the file it reads and the records read of it: each checkpoint holds it,
// so a restart neither reads an event twice nor skips one. A file that
// arrives with a number below one its worker has read is not read (its
// number came too late). No shuffling: events are trained in order.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/data/stream.hpp"

namespace troupe {

/// The sequence number of a file named `name` in a followed directory;
/// none for a file not yet complete, or a name without digits or with
/// more than 18.
std::optional<uint64_t> sequence_number(const std::string& name);

/// The share (of `count`) that reads file number `number`.
size_t share_of_file(uint64_t number, size_t count);

/// One file of a followed directory as a split read like `like` (its
/// format, shape, classes, normalisation), its records counted and its
/// labels checked: a set to evaluate on. Throws data_error naming the file.
std::shared_ptr<data_split> split_of_file(const data_split& like, const std::string& path);

/// The newest complete file of `dir` that its worker has not begun:
/// `reading[s]` is the number of the file share s reads (of
/// reading.size() shares). None where every worker has caught up.
/// Progressive validation scores it before it is trained on.
std::optional<std::string> next_unread_file(const std::string& dir,
                                            const std::vector<uint64_t>& reading);

class follow_reader final : public batch_reader {
public:
  /// `split.follow` names the directory; options.share (or index of
  /// count) the worker's share.
  follow_reader(std::shared_ptr<const data_split> split, const stream_options& options);

  /// Waits (looking every 100 ms) until batch_size examples have arrived;
  /// throws stream_stopped once stop() is called.
  void next_batch(batch& out) override;
  /// position.epoch: a file's number; offset: the records read of it.
  void seek(stream_position position) override;
  stream_position position() const noexcept override { return {file_, offset_, share_}; }
  /// Membership is fixed while following: a share other than this one is
  /// refused (data_error).
  void set_next_share(data_share share) override;
  uint64_t share_size() const noexcept override { return 0; }
  bool resident() const noexcept override { return false; }
  size_t buffer_examples() const noexcept override { return 0; }
  void stop() override { stopping_ = true; }
  void resume() override { stopping_ = false; }

private:
  /// Opens the file the position names, or the share's next one after it;
  /// false where none has arrived yet.
  bool open_next();

  std::shared_ptr<const data_split> split_;
  stream_options options_;
  size_t features_;
  data_share share_;
  uint64_t file_ = 0;   ///< the number of the file read (or to read)
  uint64_t offset_ = 0; ///< raw records of it read
  bool done_ = false;   ///< file_ is read to its end
  std::shared_ptr<data_split> one_file_;
  std::optional<example_source> source_;
  std::atomic<bool> stopping_{false};
};

} // namespace troupe
