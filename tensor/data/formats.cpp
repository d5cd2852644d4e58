#include "tensor/data/formats.hpp"

#include "tensor/data/byte_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace troupe {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  auto n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace

data_format format_of_name(const std::string& path) {
  if (ends_with(path, ".csv") || ends_with(path, ".csv.gz"))
    return data_format::csv;
  if (ends_with(path, ".npy") || ends_with(path, ".npy.gz"))
    return data_format::npy;
  if (ends_with(path, ".tsv") || ends_with(path, ".tsv.gz"))
    return data_format::criteo;
  for (auto* suffix : {".svm", ".svm.gz", ".libsvm", ".libsvm.gz"})
    if (ends_with(path, suffix))
      return data_format::libsvm;
  return data_format::idx;
}

std::optional<column_fill> parse_column_fill(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return std::nullopt;
  column_fill out{text.substr(0, eq), 0};
  const char* begin = text.data() + eq + 1;
  const char* end = text.data() + text.size();
  if (*begin == '+')
    ++begin;
  auto [p, ec] = std::from_chars(begin, end, out.value);
  if (ec != std::errc() || p != end || !std::isfinite(out.value))
    return std::nullopt;
  return out;
}

int64_t missing_fills::indicators() const {
  return static_cast<int64_t>(std::count(indicator.begin(), indicator.end(), uint8_t{1}));
}

int64_t plain_text_bytes(const std::string& path) {
  return formats::byte_file(path).plain_size();
}

std::unique_ptr<record_reader> open_records(data_format format, const std::string& features,
                                            const std::string& labels, const csv_layout& layout) {
  switch (format) {
    case data_format::idx:
      return open_idx(features, labels);
    case data_format::npy:
      return open_npy(features, labels);
    case data_format::csv:
      return open_csv(features, layout);
    case data_format::criteo:
      return open_criteo(features, layout);
    case data_format::libsvm:
      return open_libsvm(features, layout);
  }
  throw data_error("unknown data format");
}

} // namespace troupe
