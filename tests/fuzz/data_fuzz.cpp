// Fuzz target: the data readers (tensor/data). The input is split into an
// IDX image file and an IDX label file (the first two bytes, little-endian,
// give the image file's length); whatever
// the headers claim, reading either ends in a data set that passes
// check_dataset or in a troupe_error naming the file, and memory follows the
// bytes present.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "tensor/data/dataset.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2)
    return 0;
  static const std::string stem = "/tmp/troupe-data-fuzz-" + std::to_string(::getpid());
  static const std::string images = stem + "-images", labels = stem + "-labels";
  size_t image_bytes = std::min<size_t>(size - 2, data[0] | size_t{data[1]} << 8);
  std::ofstream(images, std::ios::binary | std::ios::trunc)
    .write(reinterpret_cast<const char*>(data + 2), static_cast<std::streamsize>(image_bytes));
  std::ofstream(labels, std::ios::binary | std::ios::trunc)
    .write(reinterpret_cast<const char*>(data + 2 + image_bytes),
           static_cast<std::streamsize>(size - 2 - image_bytes));
  try {
    troupe::idx_item_count(labels);
  } catch (const troupe::troupe_error&) {
  }
  try {
    auto set = troupe::load_idx(images, labels);
    troupe::check_dataset(set, 10, "fuzz input");
  } catch (const troupe::troupe_error&) {
    // refused, with a message: the expected outcome for most inputs
  }
  return 0;
}
