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

/// A header's counts, checked as both formats check them (data_error naming
/// the file): at least one record; item dimensions in 1..65536; at most
/// max_item_elements values per item.
uint64_t checked_records(uint64_t records, const std::string& path);
int64_t checked_dimension(uint64_t size, const std::string& path);
void check_item_size(const shape_t& item, const std::string& path);

/// How a format reads a file's header (of a labels file: `labels`).
using header_reader = item_layout (*)(byte_file& file, bool labels);

/// Reads the file `items` record by record, with one integer label per
/// record from the file `labels` (empty: none, every label reads 0), each
/// file's header read by `read_header`; `unit` names a record in messages
/// ("item", "record"). Refuses files that disagree or are shorter than
/// their headers claim.
std::unique_ptr<record_reader> open_paired(const std::string& items, const std::string& labels,
                                           header_reader read_header, const char* unit);

} // namespace troupe::formats
