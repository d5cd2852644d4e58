#pragma once
// A text file read line by line through byte_file (so it may be gzipped),
// without holding more than a read buffer and the current line: what the
// CSV, Criteo and libsvm readers share.
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
    for (;;) {
      if (at_ == end_) {
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
    line_number_ = 0;
    while (line_number_ < line && next_line()) {
    }
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
  std::string line_;
  uint64_t line_number_ = 0;
};

} // namespace troupe::formats
