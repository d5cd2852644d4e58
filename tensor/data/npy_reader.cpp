// NumPy .npy files: a Python-dict header (element type, order, shape), then
// the array in C order; labels in a second .npy file.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "tensor/data/formats.hpp"
#include "tensor/data/paired_reader.hpp"

namespace troupe {

namespace {

using formats::byte_file;
using formats::element;
using formats::is_integer;
using formats::item_layout;

// The value of 'key' in the header dict, up to the next top-level comma.
std::string npy_field(const std::string& header, const std::string& key, const std::string& path) {
  auto at = header.find("'" + key + "'");
  if (at == std::string::npos)
    throw data_error(path + ": .npy header lacks '" + key + "'");
  at = header.find(':', at);
  if (at == std::string::npos)
    throw data_error(path + ": malformed .npy header");
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  auto end = at;
  if (at < header.size() && header[at] == '(')
    end = header.find(')', at) + 1;
  else if (at < header.size() && header[at] == '\'')
    end = header.find('\'', at + 1) + 1;
  else
    end = header.find_first_of(",}", at);
  if (end == std::string::npos || end == 0 || end > header.size())
    throw data_error(path + ": malformed .npy header");
  return header.substr(at, end - at);
}

// The header dict; data_offset: where the array begins, after it.
std::string read_npy_dict(byte_file& f, uint64_t& data_offset) {
  unsigned char magic[8];
  f.read(magic, 8, "the .npy magic");
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw data_error(f.path() + ": not a .npy file (no \\x93NUMPY magic)");
  uint64_t header_len = 0;
  uint64_t prefix = 10;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(b, 2, "the .npy header length");
    header_len = b[0] | (b[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    unsigned char b[4];
    f.read(b, 4, "the .npy header length");
    header_len = b[0] | (b[1] << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
    prefix = 12;
  } else {
    throw data_error(f.path() + ": unsupported .npy version " + std::to_string(magic[6]));
  }
  if (header_len > 65536)
    throw data_error(f.path() + ": .npy header of " + std::to_string(header_len)
                     + " bytes is implausible");
  std::string header(header_len, '\0');
  f.read(header.data(), header.size(), "the .npy header");
  data_offset = prefix + header_len;
  return header;
}

// The element type a header's descr names, where Troupe reads it.
element npy_element(const std::string& descr, bool labels, const std::string& path) {
  static const std::pair<const char*, element> types[] = {
    {"'|u1'", element::u8},  {"'<u1'", element::u8},  {"'|i1'", element::i8},
    {"'<i1'", element::i8},  {"'<i2'", element::i16}, {"'<u2'", element::u16},
    {"'<i4'", element::i32}, {"'<u4'", element::u32}, {"'<i8'", element::i64},
    {"'<u8'", element::u64}, {"'<f4'", element::f32}, {"'<f8'", element::f64}};
  auto known = std::find_if(std::begin(types), std::end(types),
                            [&](auto& type) { return descr == type.first; });
  if (known == std::end(types))
    throw data_error(path + ": .npy element type " + descr
                     + " is not supported (features: float32, float64 or uint8; labels: "
                       "integers; little-endian)");
  if (!labels && is_integer(known->second) && known->second != element::u8)
    throw data_error(path + ": features of type " + descr
                     + " are not supported; save them as float32, float64 or uint8");
  return known->second;
}

// The numbers of a shape tuple, "(60000, 28, 28)".
std::vector<uint64_t> npy_dims(const std::string& shape, const std::string& path) {
  std::vector<uint64_t> dims;
  for (size_t i = 1; i < shape.size();) {
    if (!std::isdigit(static_cast<unsigned char>(shape[i]))) {
      ++i;
      continue;
    }
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(shape.data() + i, shape.data() + shape.size(), v);
    if (ec != std::errc())
      throw data_error(path + ": malformed .npy shape " + shape);
    dims.push_back(v);
    i = static_cast<size_t>(p - shape.data());
  }
  return dims;
}

item_layout read_npy_header(byte_file& f, bool labels) {
  item_layout out;
  auto header = read_npy_dict(f, out.data_offset);
  out.type = npy_element(npy_field(header, "descr", f.path()), labels, f.path());
  if (npy_field(header, "fortran_order", f.path()) != "False")
    throw data_error(f.path()
                     + ": Fortran-ordered arrays are not supported; save with "
                       "numpy.ascontiguousarray");
  auto shape = npy_field(header, "shape", f.path());
  auto dims = npy_dims(shape, f.path());
  if (labels ? dims.size() != 1 : (dims.size() < 2 || dims.size() > 4))
    throw data_error(
      f.path() + ": shape " + shape + "; expected "
      + (labels ? "[N] (one label per example)" : "[N, ...] with items of rank 1 to 3"));
  out.records = formats::checked_records(dims[0], f.path());
  for (size_t d = 1; d < dims.size(); ++d)
    out.item.push_back(formats::checked_dimension(dims[d], f.path()));
  formats::check_item_size(out.item, f.path());
  return out;
}

} // namespace

std::unique_ptr<record_reader> open_npy(const std::string& features, const std::string& labels) {
  return formats::open_paired(features, labels, read_npy_header, "record");
}

} // namespace troupe
