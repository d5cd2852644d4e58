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
using formats::max_item_elements;
using formats::open_paired;

item_layout read_idx_header(byte_file& f, bool labels) {
  unsigned char magic[4];
  f.read(magic, 4, "the magic number");
  item_layout out;
  out.big_endian = true;
  if (magic[0] != 0 || magic[1] != 0)
    throw data_error(f.path() + ": not an IDX file (its magic number does not start with two "
                     + "zero bytes); is this the right file, or is it CSV or .npy?");
  switch (magic[2]) {
    case 0x08:
      out.type = element::u8;
      break;
    case 0x09:
      out.type = element::i8;
      break;
    case 0x0B:
      out.type = element::i16;
      break;
    case 0x0C:
      out.type = element::i32;
      break;
    case 0x0D:
      out.type = element::f32;
      break;
    case 0x0E:
      out.type = element::f64;
      break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", magic[2]);
      throw data_error(f.path() + ": unknown IDX element type " + code);
    }
  }
  int dims = magic[3];
  if (labels ? dims != 1 : (dims < 2 || dims > 4))
    throw data_error(f.path() + ": an IDX " + (labels ? "label" : "item") + " file with "
                     + std::to_string(dims) + " dimensions; expected "
                     + (labels ? "1 (one label per item)" : "2 to 4 (items of rank 1 to 3)"));
  out.records = f.read_u32_be("the item count");
  if (out.records == 0)
    throw data_error(f.path() + ": holds no records");
  for (int d = 1; d < dims; ++d) {
    auto size = f.read_u32_be("the item shape");
    if (size == 0 || size > 65536)
      throw data_error(f.path() + ": implausible item dimension " + std::to_string(size));
    out.item.push_back(size);
  }
  if (num_elements(out.item) > max_item_elements)
    throw data_error(f.path() + ": items of " + std::to_string(num_elements(out.item))
                     + " values are beyond what Troupe reads");
  out.data_offset = 4 + 4 * static_cast<uint64_t>(dims);
  return out;
}

} // namespace

std::unique_ptr<record_reader> open_idx(const std::string& features, const std::string& labels) {
  auto items = std::make_unique<byte_file>(features);
  auto items_layout = read_idx_header(*items, false);
  if (labels.empty())
    return open_paired(std::move(items), items_layout, nullptr, item_layout{}, "item");
  auto label_file = std::make_unique<byte_file>(labels);
  auto labels_layout = read_idx_header(*label_file, true);
  return open_paired(std::move(items), items_layout, std::move(label_file), labels_layout, "item");
}

} // namespace troupe
