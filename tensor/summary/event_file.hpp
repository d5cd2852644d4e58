#pragma once
// TensorBoard event files, written without TensorFlow: TFRecord framing
// (length, masked CRC32C of the length, data, masked CRC32C of the data)
// around Event protobufs (tensorflow/core/util/event.proto), the first a
// file_version event, then one Summary event per step with simple_value
// scalars. The few protobuf fields needed are encoded by hand. Writes are
// buffered and reach the file at flush() (the caller's timer), when the
// buffer grows large, and at close: a step costs a few hundred bytes of
// memory copies, not a system call.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

/// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

/// TFRecord's masked CRC: rotate right by 15, add 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t bytes);

/// One TFRecord around `payload`.
std::string tfrecord(const std::string& payload);

/// An Event with a Summary of scalars, encoded.
std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, float>>& scalars);

/// The first Event of a file: file_version "brain.Event:2".
std::string file_version_event(double wall_time);

class event_file {
public:
  /// Creates `<dir>/events.out.tfevents.<seconds>.<host>` (and `dir`) and
  /// writes the file_version event. Throws troupe_error naming the path.
  explicit event_file(const std::string& dir);
  ~event_file();
  event_file(const event_file&) = delete;
  event_file& operator=(const event_file&) = delete;

  /// Adds scalars at `step` (buffered).
  void scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values);
  /// Writes what is buffered to the file.
  void flush();
  /// flush() when `every` has passed since the last one.
  void flush_if_older_than(std::chrono::milliseconds every);
  const std::string& path() const noexcept { return path_; }
  uint64_t bytes_written() const noexcept { return written_; }

private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  uint64_t written_ = 0;
  std::chrono::steady_clock::time_point last_flush_;
};

} // namespace troupe
