// IDX files (MNIST-style): a big-endian header of magic number and
// dimensions, then the items; labels in a second IDX file.
#include <cstdio>

#include "tensor/data/formats.hpp"
#include "tensor/data/paired_reader.hpp"

namespace troupe {

namespace {

using formats::byte_file;
using formats::element;
using formats::item_layout;

// The element type of the magic number's third byte.
element idx_element(unsigned char code, const std::string& path) {
  static const std::pair<unsigned char, element> types[] = {
    {0x08, element::u8},  {0x09, element::i8},  {0x0B, element::i16},
    {0x0C, element::i32}, {0x0D, element::f32}, {0x0E, element::f64}};
  for (auto& [known, type] : types)
    if (code == known)
      return type;
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", code);
  throw data_error(path + ": unknown IDX element type " + text);
}

item_layout read_idx_header(byte_file& f, bool labels) {
  unsigned char magic[4];
  f.read(magic, 4, "the magic number");
  item_layout out;
  out.big_endian = true;
  if (magic[0] != 0 || magic[1] != 0)
    throw data_error(f.path() + ": not an IDX file (its magic number does not start with two "
                     + "zero bytes); is this the right file, or is it CSV or .npy?");
  out.type = idx_element(magic[2], f.path());
  int dims = magic[3];
  if (labels ? dims != 1 : (dims < 2 || dims > 4))
    throw data_error(f.path() + ": an IDX " + (labels ? "label" : "item") + " file with "
                     + std::to_string(dims) + " dimensions; expected "
                     + (labels ? "1 (one label per item)" : "2 to 4 (items of rank 1 to 3)"));
  out.records = formats::checked_records(f.read_u32_be("the item count"), f.path());
  for (int d = 1; d < dims; ++d)
    out.item.push_back(formats::checked_dimension(f.read_u32_be("the item shape"), f.path()));
  formats::check_item_size(out.item, f.path());
  out.data_offset = 4 + 4 * static_cast<uint64_t>(dims);
  return out;
}

} // namespace

std::unique_ptr<record_reader> open_idx(const std::string& features, const std::string& labels) {
  return formats::open_paired(features, labels, read_idx_header, "item");
}

} // namespace troupe
