// Fuzz target: the data readers and the catalog (tensor/data). The first
// byte picks the format (0 IDX, 1 .npy, 2 CSV, 3 CSV with bad records
// skipped and the features standardised), the next two (little-endian) the
// first file's length; the rest is the second file (IDX and .npy labels).
// Whatever the files claim, cataloguing and reading them ends in examples
// that are finite with labels in range, or in a data_error naming the file;
// memory follows the bytes present, never a header's claim.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tensor/data/catalog.hpp"
#include "tests/fuzz/fuzz_target.hpp"

#define FUZZ_CHECK(condition)                                                                      \
  do {                                                                                             \
    if (!(condition))                                                                              \
      std::abort();                                                                                \
  } while (false)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3)
    return 0;
  static const troupe::fuzz::scratch_dir scratch("data");
  int format = data[0] % 4;
  static const char* suffix[] = {".idx", ".npy", ".csv", ".csv"};
  auto first = scratch.file(std::string("features") + suffix[format]);
  auto second = scratch.file(std::string("labels") + suffix[format]);
  size_t first_bytes = std::min<size_t>(size - 3, data[1] | size_t{data[2]} << 8);
  std::ofstream(first, std::ios::binary | std::ios::trunc)
    .write(reinterpret_cast<const char*>(data + 3), static_cast<std::streamsize>(first_bytes));
  std::ofstream(second, std::ios::binary | std::ios::trunc)
    .write(reinterpret_cast<const char*>(data + 3 + first_bytes),
           static_cast<std::streamsize>(size - 3 - first_bytes));
  troupe::data_options options;
  options.train = {first};
  options.test = {first};
  if (format < 2) {
    options.train_labels = {second};
    options.test_labels = {second};
  }
  if (format == 3) {
    options.bad_records = troupe::bad_record_policy::skip;
    options.normalize = troupe::normalization::standardize;
  }
  try {
    auto catalog = troupe::catalog_data(options, "");
    auto set = troupe::load_all(catalog.train);
    FUZZ_CHECK(set.size() == catalog.train->usable_records());
    for (auto label : set.labels)
      FUZZ_CHECK(label >= 0 && label < catalog.train->classes);
    FUZZ_CHECK(set.images.first_non_finite() == set.images.size());
    troupe::describe_json(catalog);
  } catch (const troupe::troupe_error&) {
    // refused, with a message: the expected outcome for most inputs
  }
  return 0;
}
