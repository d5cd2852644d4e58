#pragma once
// The file under every format reader (formats.hpp): read through zlib, which
// passes plain files through unchanged, so every format may be gzipped.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include <zlib.h>

#include "tensor/core/error.hpp"

namespace troupe::formats {

// Reads are buffered by zlib.
class byte_file {
public:
  explicit byte_file(std::string path) : path_(std::move(path)) {
    std::ifstream probe(path_);
    if (!probe)
      throw data_error(path_ + ": cannot open (missing or unreadable)");
    handle_ = gzopen(path_.c_str(), "rb");
    if (!handle_)
      throw data_error(path_ + ": cannot open with zlib");
    gzbuffer(handle_, 1u << 17);
  }
  ~byte_file() { gzclose(handle_); }
  byte_file(const byte_file&) = delete;
  byte_file& operator=(const byte_file&) = delete;

  // Up to n bytes; fewer only at the end of the file.
  size_t read_some(void* out, size_t n) {
    auto* dst = static_cast<unsigned char*>(out);
    size_t done = 0;
    while (done < n) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(handle_, dst + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(handle_, &code);
        throw data_error(path_ + ": corrupt file (" + (msg ? msg : "zlib error") + ")");
      }
      if (got == 0)
        break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  void read(void* out, size_t n, const std::string& what) {
    auto got = read_some(out, n);
    if (got != n)
      throw data_error(path_ + ": truncated: the file ends within " + what);
  }

  uint32_t read_u32_be(const std::string& what) {
    unsigned char b[4];
    read(b, 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  void seek(uint64_t offset) {
    if (gzseek(handle_, static_cast<z_off_t>(offset), SEEK_SET) < 0)
      throw data_error(path_ + ": cannot seek to byte " + std::to_string(offset));
  }

  // The uncompressed size where the file is plain (its size on disk), else -1.
  int64_t plain_size() const {
    if (!gzdirect(handle_))
      return -1;
    std::ifstream f(path_, std::ios::binary | std::ios::ate);
    return static_cast<int64_t>(f.tellg());
  }

  const std::string& path() const { return path_; }

private:
  std::string path_;
  gzFile handle_ = nullptr;
};

} // namespace troupe::formats
