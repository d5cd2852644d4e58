#pragma once
// A text file read line by line through byte_file (so it may be gzipped),
// without holding more than a read buffer and the current line: what the
// CSV, Criteo and libsvm readers share.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensor/data/byte_file.hpp"

namespace troupe::formats {

class line_file {
public:
  /// `hint`: what to check when a line runs past max_line_bytes.
  line_file(const std::string& path, std::string hint)
    : file_(std::make_unique<byte_file>(path)), hint_(std::move(hint)) {}

  static constexpr size_t max_line_bytes = size_t{16} << 20;

  /// The next line into line() (without its end, nor a trailing '\r');
  /// false at the end of the file.
  bool next_line() {
    line_.clear();
    if (buffer_offset_ + at_ >= stop_at_)
      return false; // the next line starts past the range (restrict_to)
    for (;;) {
      if (at_ == end_) {
        buffer_offset_ += end_;
        end_ = file_->read_some(buffer_.data(), buffer_.size());
        at_ = 0;
        if (end_ == 0) {
          if (line_.empty())
            return false;
          break;
        }
      }
      auto* start = buffer_.data() + at_;
      auto* nl = static_cast<char*>(std::memchr(start, '\n', end_ - at_));
      auto take = nl ? static_cast<size_t>(nl - start) : end_ - at_;
      if (line_.size() + take > max_line_bytes)
        throw data_error(file_->path() + " line " + std::to_string(line_number_ + 1)
                         + ": longer than 16 MiB; " + hint_);
      line_.append(start, take);
      at_ += take;
      if (nl) {
        ++at_;
        break;
      }
    }
    ++line_number_;
    if (!line_.empty() && line_.back() == '\r')
      line_.pop_back();
    return true;
  }

  /// Back to the start, then forward to just after line `line` (1-based; 0:
  /// the start).
  void rewind_to(uint64_t line) {
    file_->seek(0);
    at_ = end_ = 0;
    buffer_offset_ = 0;
    line_number_ = 0;
    while (line_number_ < line && next_line()) {
    }
  }

  /// From here on, only the lines that start in bytes [begin, end) of the
  /// file: a line that starts before `begin` belongs to the range before
  /// it (so ranges that meet read every line once). Line numbers then count
  /// from `begin`. False for a gzipped file, whose bytes cannot be reached
  /// by offset.
  bool restrict_to(uint64_t begin, uint64_t end) {
    if (file_->plain_size() < 0)
      return false;
    stop_at_ = end;
    if (begin == 0)
      return true; // from where the reader is (past a CSV header)
    file_->seek(begin - 1);
    buffer_offset_ = begin - 1;
    at_ = end_ = 0;
    // The rest of the line that holds byte begin - 1 (just its '\n' where
    // a line starts at begin) is the range before's.
    stop_at_ = UINT64_MAX;
    next_line();
    stop_at_ = end;
    line_number_ = 0;
    return true;
  }

  const std::string& line() const noexcept { return line_; }
  /// The number of line(), 1-based.
  uint64_t line_number() const noexcept { return line_number_; }
  const std::string& path() const noexcept { return file_->path(); }

private:
  std::unique_ptr<byte_file> file_;
  std::string hint_;
  std::vector<char> buffer_ = std::vector<char>(size_t{1} << 17);
  size_t at_ = 0, end_ = 0;
  uint64_t buffer_offset_ = 0;    ///< the file offset of buffer_[0]
  uint64_t stop_at_ = UINT64_MAX; ///< no line starting here or later (restrict_to)
  std::string line_;
  uint64_t line_number_ = 0;
};

} // namespace troupe::formats
