#pragma once
// What the binary formats (IDX, .npy) share: element types, the layout a
// file's header describes, and one reader of an items file and a labels
// file side by side.
#include <cstdint>
#include <memory>

#include "tensor/data/byte_file.hpp"
#include "tensor/data/formats.hpp"

namespace troupe::formats {

// Element types of binary files, and their conversion to float.
enum class element { u8, i8, i16, u16, i32, u32, i64, u64, f32, f64 };

inline bool is_integer(element e) {
  return e != element::f32 && e != element::f64;
}

constexpr int64_t max_item_elements = int64_t{1} << 26; // 256 MiB of floats per example

/// Where a file's records lie and what they hold, as its header says.
struct item_layout {
  uint64_t data_offset = 0; ///< where record 0 begins
  element type = element::u8;
  bool big_endian = false;
  shape_t item;
  uint64_t records = 0;
};

/// Reads `items` record by record, with one integer label per record from
/// `labels` (null: none, every label reads 0); `unit` names a record in
/// messages ("item", "record"). Refuses files that disagree or are shorter
/// than their headers claim.
std::unique_ptr<record_reader> open_paired(std::unique_ptr<byte_file> items,
                                           item_layout items_layout,
                                           std::unique_ptr<byte_file> labels,
                                           item_layout labels_layout, const char* unit);

} // namespace troupe::formats
