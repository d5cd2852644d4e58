// Fuzz target: the lines embedding models read (tensor/data/sparse_lines).
// The first byte picks the format (even: Criteo, odd: libsvm); the rest is
// split into lines at '\n'. Every line ends in an example whose fields tile
// its keys, whose keys are non-negative, whose values are finite (Criteo's
// label 0 or 1, 26 dense values and 26 fields; libsvm's one field with a
// weight per key), or in a bad_record.
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tensor/data/sparse_lines.hpp"
#include "tests/fuzz/fuzz_target.hpp"

#define FUZZ_CHECK(condition)                                                                      \
  do {                                                                                             \
    if (!(condition))                                                                              \
      std::abort();                                                                                \
  } while (false)

namespace {

void check(const troupe::sparse_example& e, bool criteo) {
  FUZZ_CHECK(std::isfinite(e.label));
  FUZZ_CHECK(e.fields() == (criteo ? 26u : 1u));
  FUZZ_CHECK(e.field_offsets.front() == 0 && e.field_offsets.back() == e.keys.size());
  for (size_t f = 0; f < e.fields(); ++f)
    FUZZ_CHECK(e.field_offsets[f] <= e.field_offsets[f + 1]);
  for (auto key : e.keys)
    FUZZ_CHECK(key >= 0);
  for (auto v : e.dense)
    FUZZ_CHECK(std::isfinite(v));
  for (auto w : e.weights)
    FUZZ_CHECK(std::isfinite(w));
  if (criteo)
    FUZZ_CHECK((e.label == 0 || e.label == 1) && e.dense.size() == 26 && e.weights.empty());
  else
    FUZZ_CHECK(e.dense.empty() && e.weights.size() == e.keys.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  bool criteo = data[0] % 2 == 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  troupe::sparse_example example;
  while (!rest.empty()) {
    auto end = rest.find('\n');
    auto line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    try {
      if (criteo)
        troupe::parse_criteo_line(line, example);
      else
        troupe::parse_libsvm_line(line, example);
      check(example, criteo);
    } catch (const troupe::bad_record&) {
      // refused, naming the field: the expected outcome for most inputs
    }
  }
  return 0;
}
