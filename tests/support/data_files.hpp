#pragma once
// Small data files for the data layer's tests: IDX, CSV and .npy written to
// a temporary directory that is removed afterwards.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <zlib.h>

#include "tensor/core/error.hpp"
#include "tests/support/errors.hpp"

namespace troupe::testing {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path()
           / ("troupe-data-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static inline int counter = 0;
};

inline void put_u32(std::vector<unsigned char>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  BOOST_REQUIRE(f);
  if (!bytes.empty())
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

/// n uint8 images of 2x3 pixels: pixel value = (first + image) * 10 + pixel.
inline std::vector<unsigned char> idx_images(uint32_t n, uint32_t first = 0,
                                             uint32_t magic = 2051) {
  std::vector<unsigned char> out;
  put_u32(out, magic);
  put_u32(out, n);
  put_u32(out, 2);
  put_u32(out, 3);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = 0; p < 6; ++p)
      out.push_back(static_cast<unsigned char>(((first + i) * 10 + p) % 256));
  return out;
}

/// n labels, label = (first + i) % 10.
inline std::vector<unsigned char> idx_labels(uint32_t n, uint32_t first = 0,
                                             uint32_t magic = 2049) {
  std::vector<unsigned char> out;
  put_u32(out, magic);
  put_u32(out, n);
  for (uint32_t i = 0; i < n; ++i)
    out.push_back(static_cast<unsigned char>((first + i) % 10));
  return out;
}

/// n images (idx_images) at `images` and their labels (idx_labels) at
/// `labels`, gzipped or plain.
inline void write_idx_pair(const std::string& images, const std::string& labels, uint32_t n,
                           bool gzipped = true) {
  auto write = gzipped ? write_gz : write_bytes;
  write(images, idx_images(n));
  write(labels, idx_labels(n));
}

/// A .npy file (version 1.0) of `descr` with `shape` and raw data `bytes`.
inline std::vector<unsigned char> npy(const std::string& descr, const std::vector<size_t>& shape,
                                      const std::vector<unsigned char>& bytes,
                                      bool fortran = false) {
  std::string dims;
  for (auto d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.erase(dims.size() - 2);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False")
                       + ", 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<unsigned char> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<unsigned char>(header.size() & 0xff));
  out.push_back(static_cast<unsigned char>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

template <class T>
std::vector<unsigned char> raw_bytes(const std::vector<T>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// The message of the data_error f() throws, or "no error".
template <class F>
std::string error_of(F f) {
  return message_of<data_error>(f);
}

/// Starts the peak below over from the current resident memory.
inline void reset_peak_resident() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

/// The peak resident memory of this process so far (VmHWM), in MiB.
inline double peak_resident_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024;
  return 0;
}

} // namespace troupe::testing
