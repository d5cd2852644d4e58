// CSV files: a header line (or none), one record per line, fields split by
// data.csv-delimiter, quoted fields as RFC 4180 writes them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "tensor/data/formats.hpp"
#include "tensor/data/key_layout.hpp"
#include "tensor/data/line_file.hpp"
#include "tensor/sparse/keys.hpp"

namespace troupe {

namespace {

using formats::line_file;

class csv_reader : public record_reader {
public:
  csv_reader(const std::string& path, const csv_layout& layout)
    : file_(path, "is data.csv-delimiter right, or is this file binary?"), layout_(layout) {
    if (layout_.header) {
      if (!next_line())
        throw data_error(path + ": empty file (no header line)");
      split(line_);
      names_.assign(fields_.begin(), fields_.end());
      columns_ = names_.size();
    } else {
      // The first data row says how many columns there are.
      auto at = file_.line_number();
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
    field_of_.assign(columns_, no_field);
    for (size_t f = 0; f < layout_.categorical_columns.size(); ++f) {
      auto c = column_of(layout_.categorical_columns[f], "data.categorical-columns");
      if (!is_feature_[c] || field_of_[c] != no_field)
        throw data_error(path + ": data.categorical-columns names column " + column_name(c)
                         + ", which is the label, ignored, or named twice");
      is_feature_[c] = false;
      field_of_[c] = f;
    }
    for (size_t c = 0; c < columns_; ++c)
      if (is_feature_[c])
        numeric_columns_.push_back(c);
    place_indicators(path);
    for (auto c : numeric_columns_)
      refused_.push_back(layout_.missing == missing_values::refuse && !has_own_fill(c));
    keys_.dense = static_cast<int64_t>(numeric_columns_.size()) + indicators_;
    keys_.fields = static_cast<int64_t>(layout_.categorical_columns.size());
    keys_.keys_per_field = keys_.fields > 0 ? 1 : 0;
    features_ = keys_.width();
    if (features_ == 0)
      throw data_error(path + ": no feature columns (only the label and ignored columns)");
    shape_ = {features_};
    first_data_line_ = file_.line_number();
  }

  bool next(raw_record& out) override {
    do {
      if (!next_line())
        return false;
    } while (is_blank(line_));
    ++index_;
    out.features.resize(static_cast<size_t>(features_));
    float* values = out.features.data();
    std::fill_n(values + numeric_columns_.size(), indicators_, 0.0f);
    // Quoted fields go through split(); plain lines are parsed in place.
    if (line_.find('"') != std::string::npos) {
      split(line_);
      check_columns(fields_.size());
      size_t f = 0;
      for (size_t c = 0; c < columns_; ++c)
        if (is_feature_[c]) {
          values[f] = value(trim(fields_[c]), c, f, values);
          ++f;
        } else if (field_of_[c] != no_field) {
          key_of(trim(fields_[c]), field_of_[c], values);
        }
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
      else if (is_feature_[c]) {
        values[f] = value(trim(text), c, f, values);
        ++f;
      } else if (field_of_[c] != no_field) {
        key_of(trim(text), field_of_[c], values);
      }
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

  bool restrict_to(uint64_t begin, uint64_t end) override { return file_.restrict_to(begin, end); }

  int64_t features() const override { return features_; }
  key_layout keys() const override { return keys_; }
  const shape_t& item_shape() const override { return shape_; }
  int64_t declared_records() const override { return -1; }
  std::string where() const override {
    return file_.path() + " line " + std::to_string(file_.line_number());
  }
  std::string label_name() const override {
    return names_.empty() || label_ == no_label ? std::string{} : names_[label_];
  }
  std::vector<std::string> numeric_columns() const override {
    std::vector<std::string> out;
    for (auto c : numeric_columns_)
      out.push_back(names_.empty() ? std::to_string(c) : names_[c]);
    return out;
  }

private:
  // A categorical value into its field's key slot after the dense values.
  // Every value is a key (ids stay ids, strings are hashed); field f's keys
  // are field_key(f, value), so that fields sharing a table never collide.
  void key_of(std::string_view text, size_t field, float* features) const {
    auto key = field_key(static_cast<uint32_t>(field), text);
    if (!vocabulary_.empty()) {
      try {
        vocabulary_.row_of(key, static_cast<uint32_t>(field));
      } catch (const data_error& e) {
        throw bad_record(where() + ": " + e.what());
      }
    }
    pack_key(key, 1.0f,
             features + keys_.dense + static_cast<int64_t>(field) * key_layout::floats_per_key);
  }

  // Where each filled column's indicator goes: after the numeric values,
  // in column order.
  void place_indicators(const std::string& path) {
    auto& fills = layout_.fills;
    if (!fills.known())
      return;
    if (fills.value.size() != numeric_columns_.size()
        || fills.indicator.size() != numeric_columns_.size())
      throw data_error(path + ": " + std::to_string(numeric_columns_.size())
                       + " numeric columns, but the training set's examples have "
                       + std::to_string(fills.value.size()) + "; are its columns the same?");
    if (!names_.empty() && fills.column.size() == numeric_columns_.size())
      for (size_t f = 0; f < numeric_columns_.size(); ++f)
        if (fills.column[f] != names_[numeric_columns_[f]])
          throw data_error(path + ": numeric column " + std::to_string(f + 1) + " is "
                           + quote_input(names_[numeric_columns_[f]]) + ", but in training it was "
                           + quote_input(fills.column[f]));
    indicator_of_.assign(numeric_columns_.size(), no_field);
    for (size_t f = 0; f < numeric_columns_.size(); ++f)
      if (fills.indicator[f])
        indicator_of_[f] = numeric_columns_.size() + static_cast<size_t>(indicators_++);
  }

  // Whether data.missing-fill names column c (by name, or by index where
  // the file has no header), as the catalog's resolve_missing_values reads it.
  bool has_own_fill(size_t c) const {
    auto name = names_.empty() ? std::to_string(c) : names_[c];
    return std::any_of(layout_.missing_fill.begin(), layout_.missing_fill.end(),
                       [&](const column_fill& f) { return f.column == name; });
  }

  // A numeric cell's value; an empty one as data.missing-values says.
  float value(std::string_view text, size_t column, size_t numeric, float* values) const {
    if (!text.empty())
      return number(text, column);
    auto& fills = layout_.fills;
    float fill = fills.known() ? fills.value[numeric] : std::nanf("");
    bool refused = fills.known() ? std::isnan(fill) : refused_[numeric];
    if (refused)
      throw bad_record(where() + ", column " + column_name(column)
                       + " is empty, and data.missing-values = \"refuse\": \"mean\" fills it "
                         "with the column's training mean and an indicator, data.missing-fill = "
                         "[\""
                       + (names_.empty() ? std::to_string(column) : names_[column])
                       + "=0\"] with a value of its own");
    if (fills.known() && indicator_of_[numeric] != no_field)
      values[indicator_of_[numeric]] = 1.0f;
    return fill; // NaN while unknown: the catalog's first pass counts it
  }

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
    if (ec != std::errc() || p != e)
      throw bad_record(where() + ", column " + column_name(column) + ": " + quote_input(text)
                       + " is not a number (a column of categories belongs in "
                         "data.categorical-columns; one to leave out in data.ignore-columns)");
    if (!std::isfinite(v))
      throw bad_record(where() + ", column " + column_name(column) + ": " + quote_input(text)
                       + " is not finite");
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
    return names_.empty() ? std::to_string(c)
                          : quote_input(names_[c]) + " (" + std::to_string(c) + ")";
  }

  size_t column_of(const std::string& spec, const char* key) const {
    if (!spec.empty() && std::all_of(spec.begin(), spec.end(), ::isdigit)) {
      auto c = std::stoull(spec);
      if (c >= columns_)
        throw data_error(file_.path() + ": " + key + " = " + spec + ", but the file has "
                         + std::to_string(columns_) + " columns (0.." + std::to_string(columns_ - 1)
                         + ")");
      return c;
    }
    if (names_.empty())
      throw data_error(file_.path() + ": " + key + " = '" + spec
                       + "' names a column, but data.csv-header is off; give the column's "
                         "0-based index instead");
    auto it = std::find(names_.begin(), names_.end(), spec);
    if (it == names_.end()) {
      std::string some;
      for (size_t i = 0; i < std::min<size_t>(names_.size(), 6); ++i)
        some += (i ? ", " : "") + names_[i];
      throw data_error(file_.path() + ": " + key + " = '" + spec
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

  bool next_line() {
    if (!file_.next_line())
      return false;
    line_ = file_.line();
    return true;
  }
  void rewind_to(uint64_t line) { file_.rewind_to(line); }

  static constexpr size_t npos_mark = static_cast<size_t>(-1);

  line_file file_;
  csv_layout layout_;
  fixed_vocabulary vocabulary_{layout_.vocabulary};
  std::vector<std::string> names_;
  size_t columns_ = 0;
  static constexpr size_t no_label = static_cast<size_t>(-1);
  size_t label_ = no_label;
  std::vector<bool> is_feature_;
  static constexpr size_t no_field = static_cast<size_t>(-1);
  std::vector<size_t> field_of_;        // column -> categorical field
  std::vector<size_t> numeric_columns_; // numeric feature -> column
  std::vector<size_t> indicator_of_;    // numeric feature -> its indicator's value (or none)
  std::vector<bool> refused_;           // numeric feature: an empty cell is a bad record
  int64_t indicators_ = 0;
  key_layout keys_;
  int64_t features_ = 0;
  shape_t shape_;
  uint64_t first_data_line_ = 0;
  uint64_t index_ = 0; // data rows read
  std::string_view line_;
  std::vector<std::string_view> fields_;
  std::vector<std::string> quoted_;
  std::vector<size_t> marks_;
};

} // namespace

std::unique_ptr<record_reader> open_csv(const std::string& path, const csv_layout& layout) {
  return std::make_unique<csv_reader>(path, layout);
}

} // namespace troupe
