// CSV files: a header line (or none), one record per line, fields split by
// data.csv-delimiter, quoted fields as RFC 4180 writes them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "tensor/data/byte_file.hpp"
#include "tensor/data/formats.hpp"

namespace troupe {

namespace {

using formats::byte_file;

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

std::unique_ptr<record_reader> open_csv(const std::string& path, const csv_layout& layout) {
  return std::make_unique<csv_reader>(path, layout);
}

} // namespace troupe
