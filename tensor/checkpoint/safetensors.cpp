#include "tensor/checkpoint/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "tensor/checkpoint/json_fields.hpp"

namespace troupe {

void fail_checkpoint(const std::string& path, const std::string& what) {
  throw checkpoint_error(path + ": " + what);
}

namespace {

std::string system_error() {
  return std::strerror(errno);
}

void put_u64_le(uint64_t v, unsigned char* out) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_u64_le(const unsigned char* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | in[i];
  return v;
}

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

} // namespace

uint32_t crc32_of(const void* data, size_t bytes, uint32_t crc) {
  auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) { // zlib takes uInt lengths
    auto chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

std::pair<uint32_t, uint64_t> file_crc32(const std::string& path) {
  file_ptr f{std::fopen(path.c_str(), "rb")};
  if (!f)
    fail_checkpoint(path, "cannot open: " + system_error());
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  uint64_t size = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    crc = crc32_of(buf.data(), n, crc);
    size += n;
  }
  if (std::ferror(f.get()))
    fail_checkpoint(path, "read error: " + system_error());
  return {crc, size};
}

safetensors_writer::safetensors_writer(std::string path, std::vector<entry> entries,
                                       std::map<std::string, std::string> metadata)
  : path_(std::move(path)), entries_(std::move(entries)) {
  json::object header;
  uint64_t offset = 0;
  for (auto& e : entries_) {
    auto bytes = static_cast<uint64_t>(num_elements(e.shape)) * element_bytes(e.type);
    json::array shape;
    for (auto d : e.shape)
      shape.emplace_back(d);
    if (e.name == "__metadata__" || header.count(e.name) > 0)
      fail_checkpoint(path_, "tensor name '" + e.name + "' is reserved or given twice");
    header.emplace(e.name, json::object{{"dtype", name_of(e.type)},
                                        {"shape", std::move(shape)},
                                        {"data_offsets", json::array{offset, offset + bytes}}});
    offset += bytes;
  }
  if (!metadata.empty()) {
    json::object meta;
    for (auto& [k, v] : metadata)
      meta.emplace(k, v);
    header.emplace("__metadata__", std::move(meta));
  }
  auto text = json::write(header);
  text.append((8 - text.size() % 8) % 8, ' '); // tensors start 8-byte aligned
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr)
    fail_checkpoint(path_, "cannot create: " + system_error());
  unsigned char length[8];
  put_u64_le(text.size(), length);
  put(length, 8);
  put(text.data(), text.size());
}

safetensors_writer::~safetensors_writer() {
  if (file_ != nullptr)
    std::fclose(file_);
}

void safetensors_writer::put(const void* data, size_t bytes) {
  if (std::fwrite(data, 1, bytes, file_) != bytes)
    fail_checkpoint(path_, "write failed: " + system_error());
  crc_ = crc32_of(data, bytes, crc_);
  size_ += bytes;
}

void safetensors_writer::append(const tensor& value) {
  if (next_ >= entries_.size())
    fail_checkpoint(path_, "more tensors appended than the header lists");
  auto& e = entries_[next_];
  if (value.shape() != e.shape || e.type != element_type::f32)
    fail_checkpoint(path_, "tensor '" + e.name + "' has shape " + to_string(value.shape())
                             + ", header says " + to_string(e.shape) + " of " + name_of(e.type));
  // float32, little-endian: the in-memory layout on every supported host.
  append(value.data(), value.bytes());
}

void safetensors_writer::append_part(const void* data, size_t bytes) {
  if (next_ >= entries_.size())
    fail_checkpoint(path_, "more tensors appended than the header lists");
  auto& e = entries_[next_];
  auto total = static_cast<uint64_t>(num_elements(e.shape)) * element_bytes(e.type);
  if (partial_ + bytes > total)
    fail_checkpoint(path_, "tensor '" + e.name + "' appended in parts beyond the "
                             + std::to_string(total) + " bytes its header entry takes");
  put(data, bytes);
  partial_ += bytes;
  if (partial_ == total) {
    partial_ = 0;
    ++next_;
  }
}

void safetensors_writer::append(const void* data, size_t bytes) {
  if (next_ >= entries_.size())
    fail_checkpoint(path_, "more tensors appended than the header lists");
  if (partial_ != 0)
    fail_checkpoint(path_, "tensor '" + entries_[next_].name + "' is only partly appended");
  auto& e = entries_[next_++];
  if (bytes != static_cast<uint64_t>(num_elements(e.shape)) * element_bytes(e.type))
    fail_checkpoint(path_, "tensor '" + e.name + "' appended with " + std::to_string(bytes)
                             + " bytes, its header entry takes "
                             + std::to_string(num_elements(e.shape) * element_bytes(e.type)));
  put(data, bytes);
}

std::pair<uint32_t, uint64_t> safetensors_writer::finish() {
  if (next_ != entries_.size())
    fail_checkpoint(path_, "only " + std::to_string(next_) + " of "
                             + std::to_string(entries_.size()) + " tensors were written");
  if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
    fail_checkpoint(path_, "cannot sync: " + system_error());
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    fail_checkpoint(path_, "cannot close: " + system_error());
  }
  file_ = nullptr;
  return {crc_, size_};
}

namespace {

// The header's JSON text; data_start: where the tensor data begins, after it.
std::string read_header_text(const std::string& path, uint64_t& data_start, uint64_t& data_size) {
  file_ptr f{std::fopen(path.c_str(), "rb")};
  if (!f)
    fail_checkpoint(path, "cannot open: " + system_error());
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    fail_checkpoint(path, "cannot seek: " + system_error());
  auto size = static_cast<uint64_t>(std::ftell(f.get()));
  std::rewind(f.get());
  unsigned char length[8];
  if (size < 8 || std::fread(length, 1, 8, f.get()) != 8)
    fail_checkpoint(path, "truncated: shorter than the 8-byte header length");
  auto header_size = get_u64_le(length);
  if (header_size > max_safetensors_header || header_size > size - 8)
    fail_checkpoint(path, "header claims " + std::to_string(header_size)
                            + " bytes, but the file holds " + std::to_string(size - 8)
                            + " after the length (truncated or not safetensors)");
  std::string text(header_size, '\0');
  if (std::fread(text.data(), 1, header_size, f.get()) != header_size)
    fail_checkpoint(path, "cannot read the header: " + system_error());
  data_start = 8 + header_size;
  data_size = size - data_start;
  return text;
}

// One tensor's header entry, checked against the data_size bytes of data.
safetensors_file::entry read_entry(const std::string& path, const std::string& name,
                                   const json::value& info, uint64_t data_size) {
  auto where = "tensor '" + name + "': ";
  auto* dtype = info.find("dtype") ? info.find("dtype")->as_string() : nullptr;
  auto type = dtype ? enum_from_name<element_type>(*dtype) : std::nullopt;
  if (!type)
    fail_checkpoint(path, where + "dtype must be F32, I64 or U32 (what Troupe's checkpoints hold)");
  safetensors_file::entry e;
  e.type = *type;
  auto* dims = info.find("shape") ? info.find("shape")->as_array() : nullptr;
  auto* offsets = info.find("data_offsets") ? info.find("data_offsets")->as_array() : nullptr;
  if (dims == nullptr || offsets == nullptr || offsets->size() != 2 || dims->size() > 8)
    fail_checkpoint(path, where + "needs a shape (at most 8 dimensions) and two data_offsets");
  uint64_t elements = 1;
  for (auto& d : *dims) {
    auto n = d.as_int();
    if (!n || *n < 0 || *n > (int64_t{1} << 40))
      fail_checkpoint(path, where + "a dimension is not a size");
    e.shape.push_back(*n);
    if (*n != 0 && elements > (uint64_t{1} << 40) / static_cast<uint64_t>(*n))
      fail_checkpoint(path, where + "shape " + to_string(e.shape) + " is too large");
    elements *= static_cast<uint64_t>(*n);
  }
  auto begin = (*offsets)[0].as_int(), end = (*offsets)[1].as_int();
  if (!begin || !end || *begin < 0 || *end < *begin || static_cast<uint64_t>(*end) > data_size)
    fail_checkpoint(path, where + "data_offsets lie outside the " + std::to_string(data_size)
                            + " bytes of data (truncated file?)");
  e.begin = static_cast<uint64_t>(*begin);
  e.end = static_cast<uint64_t>(*end);
  if (e.end - e.begin != elements * element_bytes(e.type))
    fail_checkpoint(path, where + "shape " + to_string(e.shape) + " needs "
                            + std::to_string(elements * element_bytes(e.type))
                            + " bytes, data_offsets hold " + std::to_string(e.end - e.begin));
  return e;
}

// The tensors' byte ranges must tile the data section exactly.
void check_ranges_tile(const std::string& path, std::vector<std::pair<uint64_t, uint64_t>> ranges,
                       uint64_t data_size) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (auto& [b, e] : ranges) {
    if (b != covered)
      fail_checkpoint(path,
                      "tensor data has a hole or an overlap at byte " + std::to_string(covered));
    covered = e;
  }
  if (covered != data_size)
    fail_checkpoint(path, std::to_string(data_size - covered) + " bytes follow the last tensor");
}

} // namespace

safetensors_file::safetensors_file(std::string path) : path_(std::move(path)) {
  uint64_t data_size = 0;
  auto text = read_header_text(path_, data_start_, data_size);
  json::value header;
  try {
    header = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_checkpoint(path_, std::string("header: ") + e.what());
  }
  auto* members = header.as_object();
  if (members == nullptr)
    fail_checkpoint(path_, "header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, info] : *members) {
    if (name == "__metadata__") {
      metadata_ = json::fields{path_, header, ""}.named_texts(name);
      continue;
    }
    auto e = read_entry(path_, name, info, data_size);
    ranges.emplace_back(e.begin, e.end);
    entries_.emplace(name, std::move(e));
  }
  check_ranges_tile(path_, std::move(ranges), data_size);
}

const safetensors_file::entry& safetensors_file::find(const std::string& name,
                                                      element_type type) const {
  auto i = entries_.find(name);
  if (i == entries_.end())
    fail_checkpoint(path_, "holds no tensor '" + name + "'");
  if (i->second.type != type)
    fail_checkpoint(path_, "tensor '" + name + "' is " + name_of(i->second.type) + ", expected "
                             + name_of(type));
  return i->second;
}

void safetensors_file::read_part(const std::string& name, element_type type, uint64_t offset,
                                 uint64_t bytes, void* out) const {
  read_bytes(name, find(name, type), offset, bytes, out);
}

void safetensors_file::read_bytes(const std::string& name, const entry& e, uint64_t offset,
                                  uint64_t bytes, void* out) const {
  if (offset > e.end - e.begin || bytes > e.end - e.begin - offset)
    fail_checkpoint(path_, "bytes " + std::to_string(offset) + "+" + std::to_string(bytes)
                             + " of tensor '" + name + "' are outside its "
                             + std::to_string(e.end - e.begin));
  if (bytes == 0)
    return;
  file_ptr f{std::fopen(path_.c_str(), "rb")};
  if (!f)
    fail_checkpoint(path_, "cannot open: " + system_error());
  if (std::fseek(f.get(), static_cast<long>(data_start_ + e.begin + offset), SEEK_SET) != 0
      || std::fread(out, 1, bytes, f.get()) != bytes)
    fail_checkpoint(path_, "cannot read tensor '" + name + "' (truncated?)");
}

tensor safetensors_file::read(const std::string& name) const {
  auto& e = find(name, element_type::f32);
  std::vector<float> values((e.end - e.begin) / sizeof(float));
  read_bytes(name, e, 0, e.end - e.begin, values.data());
  return tensor(e.shape, std::move(values));
}

std::vector<int64_t> safetensors_file::read_i64(const std::string& name) const {
  auto& e = find(name, element_type::i64);
  std::vector<int64_t> values((e.end - e.begin) / sizeof(int64_t));
  read_bytes(name, e, 0, e.end - e.begin, values.data());
  return values;
}

std::vector<uint32_t> safetensors_file::read_u32(const std::string& name) const {
  auto& e = find(name, element_type::u32);
  std::vector<uint32_t> values((e.end - e.begin) / sizeof(uint32_t));
  read_bytes(name, e, 0, e.end - e.begin, values.data());
  return values;
}

} // namespace troupe
