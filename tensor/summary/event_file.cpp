#include "tensor/summary/event_file.hpp"

#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>

#include "tensor/core/error.hpp"
#include "tensor/core/protobuf.hpp"

namespace troupe {

namespace {

constexpr size_t flush_at_bytes = size_t{1} << 16;

std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Event fields (event.proto): wall_time 1 (double), step 2 (int64),
// file_version 3 (string), summary 5 (Summary).
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  protobuf::double_field(e, 1, wall_time);
  if (step != 0)
    protobuf::int_field(e, 2, step);
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  static const auto table = crc32c_table();
  auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < bytes; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string out;
  uint64_t length = payload.size();
  protobuf::fixed(out, length);
  protobuf::fixed(out, masked_crc32c(out.data(), 8));
  out += payload;
  protobuf::fixed(out, masked_crc32c(payload.data(), payload.size()));
  return out;
}

std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, float>>& scalars) {
  // Summary: repeated Value value = 1; Value: tag 1 (string), simple_value 2 (float).
  std::string summary;
  for (auto& [tag, value] : scalars) {
    std::string v;
    protobuf::bytes_field(v, 1, tag);
    protobuf::float_field(v, 2, value);
    protobuf::bytes_field(summary, 1, v);
  }
  auto e = event_head(wall_time, step);
  protobuf::bytes_field(e, 5, summary);
  return e;
}

std::string file_version_event(double wall_time) {
  auto e = event_head(wall_time, 0);
  protobuf::bytes_field(e, 3, "brain.Event:2");
  return e;
}

event_file::event_file(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  auto now = now_seconds();
  path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host;
  // Several writers may start within one second (a restart): never append
  // to another's file.
  for (int n = 1; std::filesystem::exists(path_); ++n)
    path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host
            + "." + std::to_string(n);
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw troupe_error(path_ + ": cannot create the TensorBoard event file");
  buffer_ = tfrecord(file_version_event(now));
  flush();
}

event_file::~event_file() {
  flush();
  std::fclose(file_);
}

void event_file::scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  buffer_ += tfrecord(scalar_event(now_seconds(), step, values));
  if (buffer_.size() >= flush_at_bytes)
    flush();
}

void event_file::flush() {
  last_flush_ = std::chrono::steady_clock::now();
  if (buffer_.empty())
    return;
  std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  std::fflush(file_);
  written_ += buffer_.size();
  buffer_.clear();
}

void event_file::flush_if_older_than(std::chrono::milliseconds every) {
  if (std::chrono::steady_clock::now() - last_flush_ >= every)
    flush();
}

} // namespace troupe
