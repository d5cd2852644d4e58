// Criteo and libsvm files as record_readers: each line parsed by
// sparse_lines and laid out as a key_layout row (dense values, then key
// slots), so that the catalog, the streams and the batches carry them as
// they carry dense examples.
#include <algorithm>
#include <string>

#include "tensor/data/formats.hpp"
#include "tensor/data/line_file.hpp"
#include "tensor/data/sparse_lines.hpp"
#include "tensor/sparse/keys.hpp"

namespace troupe {

namespace {

using formats::line_file;

class sparse_line_reader : public record_reader {
public:
  sparse_line_reader(const std::string& path, data_format format, key_layout keys,
                     const csv_layout& layout)
    : file_(path, std::string("is this a ") + name_of(format) + " file?"), format_(format),
      keys_(keys), shape_{keys.width()}, vocabulary_(layout.vocabulary) {}

  bool next(raw_record& out) override {
    do {
      if (!file_.next_line())
        return false;
    } while (file_.line().find_first_not_of(" \t\r") == std::string::npos);
    try {
      if (format_ == data_format::criteo)
        parse_criteo_line(file_.line(), example_);
      else
        parse_libsvm_line(file_.line(), example_);
    } catch (const bad_record& e) {
      throw bad_record(where() + ": " + e.what());
    }
    lay_out(out);
    return true;
  }

  void seek(uint64_t index) override {
    file_.rewind_to(0);
    for (uint64_t i = 0; i < index;) {
      if (!file_.next_line())
        return;
      if (file_.line().find_first_not_of(" \t\r") != std::string::npos)
        ++i;
    }
  }

  bool restrict_to(uint64_t begin, uint64_t end) override { return file_.restrict_to(begin, end); }

  int64_t features() const override { return keys_.width(); }
  key_layout keys() const override { return keys_; }
  const shape_t& item_shape() const override { return shape_; }
  int64_t declared_records() const override { return -1; }
  std::string where() const override {
    return file_.path() + " line " + std::to_string(file_.line_number());
  }

private:
  void lay_out(raw_record& out) {
    out.features.resize(static_cast<size_t>(keys_.width()));
    try {
      lay_out_example(example_, keys_, vocabulary_, out.features.data());
    } catch (const bad_record& e) {
      throw bad_record(where() + ": " + e.what());
    }
    // The label as written: example_source maps it to a class or target.
    auto& line = file_.line();
    auto first = line.find_first_not_of(" \t");
    auto end = line.find_first_of(" \t\r", first);
    out.label_text = std::string_view(line).substr(first, end - first);
  }

  line_file file_;
  data_format format_;
  key_layout keys_;
  shape_t shape_;
  fixed_vocabulary vocabulary_;
  sparse_example example_;
};

} // namespace

std::unique_ptr<record_reader> open_criteo(const std::string& path, const csv_layout& layout) {
  return std::make_unique<sparse_line_reader>(
    path, data_format::criteo, key_layout{criteo::dense_values, criteo::categorical_fields, 1},
    layout);
}

std::unique_ptr<record_reader> open_libsvm(const std::string& path, const csv_layout& layout) {
  return std::make_unique<sparse_line_reader>(path, data_format::libsvm,
                                              key_layout{0, 1, layout.max_keys}, layout);
}

} // namespace troupe
