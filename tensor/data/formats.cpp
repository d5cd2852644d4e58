#include "tensor/data/formats.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <zlib.h>

namespace troupe {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  auto n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A file read through zlib, which passes plain files through unchanged, so
// every format may be gzipped. Reads are buffered by zlib.
class byte_file {
public:
  explicit byte_file(std::string path) : path_(std::move(path)) {
    std::ifstream probe(path_);
    if (!probe)
      throw data_error(path_ + ": cannot open (missing or unreadable)");
    handle_ = gzopen(path_.c_str(), "rb");
    if (!handle_)
      throw data_error(path_ + ": cannot open with zlib");
    gzbuffer(handle_, 1u << 17);
  }
  ~byte_file() { gzclose(handle_); }
  byte_file(const byte_file&) = delete;
  byte_file& operator=(const byte_file&) = delete;

  // Up to n bytes; fewer only at the end of the file.
  size_t read_some(void* out, size_t n) {
    auto* dst = static_cast<unsigned char*>(out);
    size_t done = 0;
    while (done < n) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(handle_, dst + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(handle_, &code);
        throw data_error(path_ + ": corrupt file (" + (msg ? msg : "zlib error") + ")");
      }
      if (got == 0)
        break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  void read(void* out, size_t n, const std::string& what) {
    auto got = read_some(out, n);
    if (got != n)
      throw data_error(path_ + ": truncated: the file ends within " + what);
  }

  uint32_t read_u32_be(const std::string& what) {
    unsigned char b[4];
    read(b, 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  void seek(uint64_t offset) {
    if (gzseek(handle_, static_cast<z_off_t>(offset), SEEK_SET) < 0)
      throw data_error(path_ + ": cannot seek to byte " + std::to_string(offset));
  }

  // The uncompressed size where the file is plain (its size on disk), else -1.
  int64_t plain_size() const {
    if (!gzdirect(handle_))
      return -1;
    std::ifstream f(path_, std::ios::binary | std::ios::ate);
    return static_cast<int64_t>(f.tellg());
  }

  const std::string& path() const { return path_; }

private:
  std::string path_;
  gzFile handle_ = nullptr;
};

// Element types of binary files, and their conversion to float.
enum class element { u8, i8, i16, u16, i32, u32, i64, u64, f32, f64 };

size_t element_bytes(element e) {
  switch (e) {
    case element::u8:
    case element::i8:
      return 1;
    case element::i16:
    case element::u16:
      return 2;
    case element::i32:
    case element::u32:
    case element::f32:
      return 4;
    default:
      return 8;
  }
}

bool is_integer(element e) {
  return e != element::f32 && e != element::f64;
}

template <class T>
T load(const unsigned char* p, bool big_endian) {
  unsigned char b[sizeof(T)];
  if (big_endian)
    std::reverse_copy(p, p + sizeof(T), b);
  else
    std::memcpy(b, p, sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

// Values are stored little-endian on every host Troupe builds for.
double value_at(const unsigned char* p, element e, bool big_endian) {
  switch (e) {
    case element::u8:
      return *p;
    case element::i8:
      return static_cast<int8_t>(*p);
    case element::i16:
      return load<int16_t>(p, big_endian);
    case element::u16:
      return load<uint16_t>(p, big_endian);
    case element::i32:
      return load<int32_t>(p, big_endian);
    case element::u32:
      return load<uint32_t>(p, big_endian);
    case element::i64:
      return static_cast<double>(load<int64_t>(p, big_endian));
    case element::u64:
      return static_cast<double>(load<uint64_t>(p, big_endian));
    case element::f32:
      return load<float>(p, big_endian);
    case element::f64:
      return load<double>(p, big_endian);
  }
  return 0;
}

int64_t integer_at(const unsigned char* p, element e, bool big_endian) {
  switch (e) {
    case element::i64:
      return load<int64_t>(p, big_endian);
    case element::u64: {
      auto v = load<uint64_t>(p, big_endian);
      return v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v);
    }
    default:
      return static_cast<int64_t>(value_at(p, e, big_endian));
  }
}

constexpr int64_t max_item_elements = int64_t{1} << 26; // 256 MiB of floats per example

// Reads an items file and a labels file side by side (IDX and .npy).
class paired_reader : public record_reader {
public:
  struct layout {
    uint64_t data_offset = 0; // where record 0 begins
    element type = element::u8;
    bool big_endian = false;
    shape_t item;
    uint64_t records = 0;
  };

  paired_reader(std::unique_ptr<byte_file> items, layout items_layout,
                std::unique_ptr<byte_file> labels, layout labels_layout, const char* unit)
    : items_(std::move(items)), labels_(std::move(labels)), item_(std::move(items_layout)),
      label_(std::move(labels_layout)), unit_(unit) {
    if (labels_ && label_.records != item_.records)
      throw data_error(labels_->path() + ": holds " + std::to_string(label_.records)
                       + " labels but " + items_->path() + " holds " + std::to_string(item_.records)
                       + " items");
    if (labels_ && !is_integer(label_.type))
      throw data_error(labels_->path() + ": labels must be integers");
    features_ = num_elements(item_.item);
    item_bytes_ = static_cast<size_t>(features_) * element_bytes(item_.type);
    check_size(*items_, item_, item_bytes_);
    if (labels_)
      check_size(*labels_, label_, element_bytes(label_.type));
    buffer_.resize(item_bytes_);
  }

  bool next(raw_record& out) override {
    if (index_ >= item_.records)
      return false;
    auto record = index_++;
    auto what = [&] { return unit_ + " " + std::to_string(record); };
    if (items_->read_some(buffer_.data(), buffer_.size()) != buffer_.size())
      throw data_error(items_->path() + ": truncated: the file ends within " + what());
    out.label = 0;
    if (labels_) {
      unsigned char label[8];
      if (labels_->read_some(label, element_bytes(label_.type)) != element_bytes(label_.type))
        throw data_error(labels_->path() + ": truncated: the file ends within the label of "
                         + what());
      out.label = integer_at(label, label_.type, label_.big_endian);
    }
    out.features.resize(static_cast<size_t>(features_));
    auto step = element_bytes(item_.type);
    if (item_.type == element::u8) {
      for (size_t i = 0; i < out.features.size(); ++i)
        out.features[i] = static_cast<float>(buffer_[i]);
      return true;
    }
    for (size_t i = 0; i < out.features.size(); ++i) {
      auto v = static_cast<float>(
        value_at(buffer_.data() + i * step, item_.type, item_.big_endian));
      if (!std::isfinite(v))
        throw bad_record(items_->path() + " " + what() + ": value " + std::to_string(i)
                         + " is not finite (or out of float range)");
      out.features[i] = v;
    }
    return true;
  }

  void seek(uint64_t index) override {
    index_ = std::min(index, item_.records);
    items_->seek(item_.data_offset + index_ * item_bytes_);
    if (labels_)
      labels_->seek(label_.data_offset + index_ * element_bytes(label_.type));
  }

  int64_t features() const override { return features_; }
  const shape_t& item_shape() const override { return item_.item; }
  int64_t declared_records() const override { return static_cast<int64_t>(item_.records); }
  std::string where() const override {
    return items_->path() + " " + unit_ + " " + std::to_string(index_ == 0 ? 0 : index_ - 1);
  }
  bool holds_bytes() const override { return item_.type == element::u8; }

private:
  // A plain file must hold what its header claims: a truncated one is
  // refused before training, naming where it ends.
  static void check_size(const byte_file& f, const layout& l, size_t record_bytes) {
    auto size = f.plain_size();
    if (size < 0)
      return; // gzipped: found while reading
    auto want = l.data_offset + l.records * record_bytes;
    if (static_cast<uint64_t>(size) < want)
      throw data_error(
        f.path() + ": truncated: its header claims " + std::to_string(l.records)
        + " records, but the file ends within record "
        + std::to_string((static_cast<uint64_t>(size)
                          - std::min<uint64_t>(static_cast<uint64_t>(size), l.data_offset))
                         / record_bytes)
        + " (" + std::to_string(size) + " of " + std::to_string(want) + " bytes)");
  }

  std::unique_ptr<byte_file> items_, labels_;
  layout item_, label_;
  std::string unit_;
  int64_t features_ = 0;
  size_t item_bytes_ = 0;
  uint64_t index_ = 0;
  std::vector<unsigned char> buffer_;
};

// ---- IDX ----

paired_reader::layout read_idx_header(byte_file& f, bool labels) {
  unsigned char magic[4];
  f.read(magic, 4, "the magic number");
  paired_reader::layout out;
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

// ---- .npy ----

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

paired_reader::layout read_npy_header(byte_file& f, bool labels) {
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
  paired_reader::layout out;
  out.data_offset = prefix + header_len;
  auto descr = npy_field(header, "descr", f.path());
  static const std::pair<const char*, element> types[] = {
    {"'|u1'", element::u8},  {"'<u1'", element::u8},  {"'|i1'", element::i8},
    {"'<i1'", element::i8},  {"'<i2'", element::i16}, {"'<u2'", element::u16},
    {"'<i4'", element::i32}, {"'<u4'", element::u32}, {"'<i8'", element::i64},
    {"'<u8'", element::u64}, {"'<f4'", element::f32}, {"'<f8'", element::f64}};
  bool known = false;
  for (auto& [name, type] : types)
    if (descr == name) {
      out.type = type;
      known = true;
    }
  if (!known)
    throw data_error(f.path() + ": .npy element type " + descr
                     + " is not supported (features: float32, float64 or uint8; labels: "
                       "integers; little-endian)");
  if (!labels && is_integer(out.type) && out.type != element::u8)
    throw data_error(f.path() + ": features of type " + descr
                     + " are not supported; save them as float32, float64 or uint8");
  if (npy_field(header, "fortran_order", f.path()) != "False")
    throw data_error(f.path()
                     + ": Fortran-ordered arrays are not supported; save with "
                       "numpy.ascontiguousarray");
  auto shape = npy_field(header, "shape", f.path());
  std::vector<uint64_t> dims;
  for (size_t i = 1; i < shape.size();) {
    if (!std::isdigit(static_cast<unsigned char>(shape[i]))) {
      ++i;
      continue;
    }
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(shape.data() + i, shape.data() + shape.size(), v);
    if (ec != std::errc())
      throw data_error(f.path() + ": malformed .npy shape " + shape);
    dims.push_back(v);
    i = static_cast<size_t>(p - shape.data());
  }
  if (labels ? dims.size() != 1 : (dims.size() < 2 || dims.size() > 4))
    throw data_error(
      f.path() + ": shape " + shape + "; expected "
      + (labels ? "[N] (one label per example)" : "[N, ...] with items of rank 1 to 3"));
  if (dims[0] == 0)
    throw data_error(f.path() + ": holds no records");
  out.records = dims[0];
  for (size_t d = 1; d < dims.size(); ++d) {
    if (dims[d] == 0 || dims[d] > 65536)
      throw data_error(f.path() + ": implausible item dimension " + std::to_string(dims[d]));
    out.item.push_back(static_cast<int64_t>(dims[d]));
  }
  if (num_elements(out.item) > max_item_elements)
    throw data_error(f.path() + ": items of " + std::to_string(num_elements(out.item))
                     + " values are beyond what Troupe reads");
  return out;
}

// ---- CSV ----

constexpr size_t max_line_bytes = size_t{16} << 20;

class csv_reader : public record_reader {
public:
  csv_reader(const std::string& path, const csv_layout& layout)
    : file_(std::make_unique<byte_file>(path)), layout_(layout) {
    if (layout_.header) {
      if (!next_line())
        throw data_error(path + ": empty file (no header line)");
      split(line_);
      names_.assign(fields_.begin(), fields_.end());
      columns_ = names_.size();
    } else {
      // The first data row says how many columns there are.
      auto at = line_number_;
      if (!next_line())
        throw data_error(path + ": empty file");
      split(line_);
      columns_ = fields_.size();
      rewind_to(at);
    }
    is_feature_.assign(columns_, true);
    if (!layout_.label_column.empty()) {
      label_ = column_of(layout_.label_column, "data.label-column");
      is_feature_[label_] = false;
    }
    for (auto& c : layout_.ignore_columns)
      is_feature_[column_of(c, "data.ignore-columns")] = false;
    features_ = static_cast<int64_t>(std::count(is_feature_.begin(), is_feature_.end(), true));
    if (features_ == 0)
      throw data_error(path + ": no feature columns (only the label and ignored columns)");
    shape_ = {features_};
    first_data_line_ = line_number_;
  }

  bool next(raw_record& out) override {
    do {
      if (!next_line())
        return false;
    } while (is_blank(line_));
    ++index_;
    out.features.resize(static_cast<size_t>(features_));
    // Quoted fields go through split(); plain lines are parsed in place.
    if (line_.find('"') != std::string::npos) {
      split(line_);
      check_columns(fields_.size());
      size_t f = 0;
      for (size_t c = 0; c < columns_; ++c)
        if (is_feature_[c])
          out.features[f++] = number(trim(fields_[c]), c);
      out.label_text = label_ == no_label ? std::string_view{} : trim(fields_[label_]);
      return true;
    }
    check_columns(1
                  + static_cast<size_t>(std::count(line_.begin(), line_.end(), layout_.delimiter)));
    const char* at = line_.data();
    const char* end = at + line_.size();
    size_t f = 0;
    for (size_t c = 0; c < columns_; ++c) {
      auto* stop = static_cast<const char*>(
        std::memchr(at, layout_.delimiter, static_cast<size_t>(end - at)));
      if (!stop)
        stop = end;
      std::string_view text(at, static_cast<size_t>(stop - at));
      if (c == label_)
        out.label_text = trim(text);
      else if (is_feature_[c])
        out.features[f++] = number(trim(text), c);
      at = stop + 1;
    }
    return true;
  }
  void seek(uint64_t index) override {
    rewind_to(first_data_line_);
    index_ = 0;
    while (index_ < index) {
      if (!next_line())
        return;
      if (!is_blank(line_))
        ++index_;
    }
  }

  int64_t features() const override { return features_; }
  const shape_t& item_shape() const override { return shape_; }
  int64_t declared_records() const override { return -1; }
  std::string where() const override {
    return file_->path() + " line " + std::to_string(line_number_);
  }
  std::string label_name() const override {
    return names_.empty() || label_ == no_label ? std::string{} : names_[label_];
  }

private:
  void check_columns(size_t found) const {
    if (found != columns_)
      throw bad_record(where() + ": " + std::to_string(found) + " columns, expected "
                       + std::to_string(columns_));
  }

  // A field's value. Short integers (pixel values, counts) are converted
  // directly, exactly as from_chars would; anything else goes through it.
  float number(std::string_view text, size_t column) const {
    const char* s = text.data();
    const char* e = s + text.size();
    bool negative = false;
    if (s < e && (*s == '-' || *s == '+')) {
      negative = *s == '-';
      ++s;
    }
    if (s < e && e - s <= 7) {
      int32_t v = 0;
      const char* d = s;
      for (; d < e && *d >= '0' && *d <= '9'; ++d)
        v = v * 10 + (*d - '0');
      if (d == e) {
        auto f = static_cast<float>(v);
        return negative ? -f : f;
      }
    }
    float v = 0;
    const char* begin = text.data();
    if (!text.empty() && *begin == '+')
      ++begin;
    auto [p, ec] = std::from_chars(begin, e, v);
    if (text.empty() || ec != std::errc() || p != e)
      throw bad_record(where() + ", column " + column_name(column) + ": '" + std::string(text)
                       + "' is not a number");
    if (!std::isfinite(v))
      throw bad_record(where() + ", column " + column_name(column) + ": '" + std::string(text)
                       + "' is not finite");
    return v;
  }

  static bool is_blank(std::string_view s) {
    return s.find_first_not_of(" \t\r") == std::string_view::npos;
  }

  static std::string_view trim(std::string_view s) {
    auto b = s.find_first_not_of(" \t");
    if (b == std::string_view::npos)
      return {};
    auto e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
  }

  std::string column_name(size_t c) const {
    return names_.empty() ? std::to_string(c) : "'" + names_[c] + "' (" + std::to_string(c) + ")";
  }

  size_t column_of(const std::string& spec, const char* key) const {
    if (!spec.empty() && std::all_of(spec.begin(), spec.end(), ::isdigit)) {
      auto c = std::stoull(spec);
      if (c >= columns_)
        throw data_error(file_->path() + ": " + key + " = " + spec + ", but the file has "
                         + std::to_string(columns_) + " columns (0.." + std::to_string(columns_ - 1)
                         + ")");
      return c;
    }
    if (names_.empty())
      throw data_error(file_->path() + ": " + key + " = '" + spec
                       + "' names a column, but data.csv-header is off; give the column's "
                         "0-based index instead");
    auto it = std::find(names_.begin(), names_.end(), spec);
    if (it == names_.end()) {
      std::string some;
      for (size_t i = 0; i < std::min<size_t>(names_.size(), 6); ++i)
        some += (i ? ", " : "") + names_[i];
      throw data_error(file_->path() + ": " + key + " = '" + spec
                       + "' is not a column of its header (" + some
                       + (names_.size() > 6 ? ", ..." : "") + ")");
    }
    return static_cast<size_t>(it - names_.begin());
  }

  // Splits a line into fields; a field in double quotes may hold the
  // delimiter, and "" within it stands for one quote.
  void split(std::string_view line) {
    fields_.clear();
    quoted_.clear();
    size_t i = 0;
    for (;;) {
      if (i < line.size() && line[i] == '"') {
        std::string value;
        ++i;
        while (i < line.size()) {
          if (line[i] == '"') {
            if (i + 1 < line.size() && line[i + 1] == '"') {
              value += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          value += line[i++];
        }
        quoted_.push_back(std::move(value));
        fields_.push_back({}); // filled below, once quoted_ stops moving
        marks_.push_back(quoted_.size() - 1);
        auto end = line.find(layout_.delimiter, i);
        if (end == std::string_view::npos)
          break;
        i = end + 1;
      } else {
        auto end = line.find(layout_.delimiter, i);
        fields_.push_back(line.substr(i, end == std::string_view::npos ? end : end - i));
        marks_.push_back(npos_mark);
        if (end == std::string_view::npos)
          break;
        i = end + 1;
      }
    }
    for (size_t f = 0; f < fields_.size(); ++f)
      if (marks_[f] != npos_mark)
        fields_[f] = quoted_[marks_[f]];
    marks_.clear();
  }

  // The next line into line_ (without its end), false at the end of the file.
  bool next_line() {
    line_.clear();
    for (;;) {
      if (at_ == end_) {
        end_ = file_->read_some(buffer_.data(), buffer_.size());
        at_ = 0;
        if (end_ == 0) {
          if (line_.empty())
            return false;
          break;
        }
      }
      auto* start = buffer_.data() + at_;
      auto* nl = static_cast<char*>(std::memchr(start, '\n', end_ - at_));
      auto take = nl ? static_cast<size_t>(nl - start) : end_ - at_;
      if (line_.size() + take > max_line_bytes)
        throw data_error(file_->path() + " line " + std::to_string(line_number_ + 1)
                         + ": longer than 16 MiB; is data.csv-delimiter right, or is this "
                           "file binary?");
      line_.append(start, take);
      at_ += take;
      if (nl) {
        ++at_;
        break;
      }
    }
    ++line_number_;
    if (!line_.empty() && line_.back() == '\r')
      line_.pop_back();
    return true;
  }

  void rewind_to(uint64_t line) {
    file_->seek(0);
    at_ = end_ = 0;
    line_number_ = 0;
    while (line_number_ < line && next_line()) {
    }
  }

  static constexpr size_t npos_mark = static_cast<size_t>(-1);

  std::unique_ptr<byte_file> file_;
  csv_layout layout_;
  std::vector<std::string> names_;
  size_t columns_ = 0;
  static constexpr size_t no_label = static_cast<size_t>(-1);
  size_t label_ = no_label;
  std::vector<bool> is_feature_;
  int64_t features_ = 0;
  shape_t shape_;
  uint64_t first_data_line_ = 0;
  uint64_t line_number_ = 0; // of line_, 1-based
  uint64_t index_ = 0;       // data rows read
  std::vector<char> buffer_ = std::vector<char>(size_t{1} << 17);
  size_t at_ = 0, end_ = 0;
  std::string line_;
  std::vector<std::string_view> fields_;
  std::vector<std::string> quoted_;
  std::vector<size_t> marks_;
};

} // namespace

data_format format_of_name(const std::string& path) {
  if (ends_with(path, ".csv") || ends_with(path, ".csv.gz"))
    return data_format::csv;
  if (ends_with(path, ".npy") || ends_with(path, ".npy.gz"))
    return data_format::npy;
  return data_format::idx;
}

std::unique_ptr<record_reader> open_idx(const std::string& features, const std::string& labels) {
  auto items = std::make_unique<byte_file>(features);
  auto items_layout = read_idx_header(*items, false);
  if (labels.empty())
    return std::make_unique<paired_reader>(std::move(items), items_layout, nullptr,
                                           paired_reader::layout{}, "item");
  auto label_file = std::make_unique<byte_file>(labels);
  auto labels_layout = read_idx_header(*label_file, true);
  return std::make_unique<paired_reader>(std::move(items), items_layout, std::move(label_file),
                                         labels_layout, "item");
}

std::unique_ptr<record_reader> open_npy(const std::string& features, const std::string& labels) {
  auto items = std::make_unique<byte_file>(features);
  auto items_layout = read_npy_header(*items, false);
  if (labels.empty())
    return std::make_unique<paired_reader>(std::move(items), items_layout, nullptr,
                                           paired_reader::layout{}, "record");
  auto label_file = std::make_unique<byte_file>(labels);
  auto labels_layout = read_npy_header(*label_file, true);
  return std::make_unique<paired_reader>(std::move(items), items_layout, std::move(label_file),
                                         labels_layout, "record");
}

std::unique_ptr<record_reader> open_csv(const std::string& path, const csv_layout& layout) {
  return std::make_unique<csv_reader>(path, layout);
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
  }
  throw data_error("unknown data format");
}

} // namespace troupe
