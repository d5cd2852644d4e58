#pragma once
// The safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes, back to back with no holes. The writer streams: the header comes from the
// names and shapes known up front, then each tensor is appended as it
// arrives, so a file never needs the whole set in memory. The reader trusts
// nothing: the header length against the file size, every range against
// the data, the shape against the range, coverage without holes or
// overlaps, before any tensor is read. Dense checkpoints hold float32
// ("F32"); embedding tables add their keys ("I64") and row counters
// ("U32").
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// A checkpoint file that is missing, truncated, corrupt or not what its
/// manifest says; the message names the file.
struct checkpoint_error : troupe_error {
  using troupe_error::troupe_error;
};

/// Throws checkpoint_error("PATH: WHAT").
[[noreturn]] void fail_checkpoint(const std::string& path, const std::string& what);

/// CRC-32 (zlib's) of `bytes` bytes, continuing from `crc`.
uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc = 0);

/// CRC-32 and size of a whole file; throws checkpoint_error if unreadable.
std::pair<uint32_t, uint64_t> file_crc32(const std::string& path);

/// The element types Troupe writes, little-endian as on every supported
/// host, under the format's dtype names.
enum class element_type { f32, i64, u32 };

TROUPE_ENUM_NAMES(element_type, {element_type::f32, "F32"}, {element_type::i64, "I64"},
                  {element_type::u32, "U32"});

inline size_t element_bytes(element_type type) {
  return type == element_type::i64 ? 8 : 4;
}

/// Writes a file to `path` (the caller renames it into place once complete).
class safetensors_writer {
public:
  struct entry {
    std::string name;
    shape_t shape;
    element_type type = element_type::f32;
  };
  /// Creates the file and writes the header; throws checkpoint_error.
  safetensors_writer(std::string path, std::vector<entry> entries,
                     std::map<std::string, std::string> metadata = {});
  ~safetensors_writer();
  safetensors_writer(const safetensors_writer&) = delete;
  safetensors_writer& operator=(const safetensors_writer&) = delete;

  /// Appends the next tensor (entries' order); its shape must be the entry's.
  void append(const tensor& value);
  /// Appends the next tensor's raw elements (any element type); `bytes`
  /// must be what the entry's shape and type take.
  void append(const void* data, size_t bytes);
  /// Appends part of the next tensor's raw elements: the tensor is done
  /// once its parts add up to its entry (a large table's field, fetched in
  /// pieces).
  void append_part(const void* data, size_t bytes);
  /// Flushes and syncs; returns the CRC-32 and size of the whole file.
  std::pair<uint32_t, uint64_t> finish();

private:
  void put(const void* data, size_t bytes);

  std::string path_;
  std::vector<entry> entries_;
  size_t next_ = 0;
  uint64_t partial_ = 0; ///< bytes of entries_[next_] appended so far in parts
  std::FILE* file_ = nullptr;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

/// A file opened and checked; tensors are read one at a time.
class safetensors_file {
public:
  struct entry {
    shape_t shape;
    element_type type = element_type::f32;
    uint64_t begin = 0; ///< byte offset within the data section
    uint64_t end = 0;
  };
  /// Reads and checks the header; throws checkpoint_error naming the file.
  explicit safetensors_file(std::string path);

  const std::map<std::string, entry>& entries() const noexcept { return entries_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// Reads tensor `name`; throws checkpoint_error if absent or unreadable.
  tensor read(const std::string& name) const;
  /// Reads an I64 or U32 tensor's elements; throws checkpoint_error if
  /// absent, of another type, or unreadable.
  std::vector<int64_t> read_i64(const std::string& name) const;
  std::vector<uint32_t> read_u32(const std::string& name) const;
  /// Bytes [offset, offset + bytes) of tensor `name`'s data, which must be
  /// of `type`: a part of a tensor too large to read whole. Throws
  /// checkpoint_error if absent, of another type, the range outside it, or
  /// unreadable.
  void read_part(const std::string& name, element_type type, uint64_t offset, uint64_t bytes,
                 void* out) const;
  /// Tensor `name`, which must be of `type` (throws checkpoint_error).
  const entry& find(const std::string& name, element_type type) const;

private:
  void read_bytes(const std::string& name, const entry& e, uint64_t offset, uint64_t bytes,
                  void* out) const;

  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, entry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// The largest header a reader accepts (the format's own limit).
constexpr uint64_t max_safetensors_header = 100u << 20;

} // namespace troupe
