#include "tensor/data/paired_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace troupe::formats {

namespace {

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

// Reads an items file and a labels file side by side (IDX and .npy).
class paired_reader : public record_reader {
public:
  using layout = item_layout;

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

} // namespace

uint64_t checked_records(uint64_t records, const std::string& path) {
  if (records == 0)
    throw data_error(path + ": holds no records");
  return records;
}

int64_t checked_dimension(uint64_t size, const std::string& path) {
  if (size == 0 || size > 65536)
    throw data_error(path + ": implausible item dimension " + std::to_string(size));
  return static_cast<int64_t>(size);
}

void check_item_size(const shape_t& item, const std::string& path) {
  if (num_elements(item) > max_item_elements)
    throw data_error(path + ": items of " + std::to_string(num_elements(item))
                     + " values are beyond what Troupe reads");
}

std::unique_ptr<record_reader> open_paired(const std::string& items, const std::string& labels,
                                           header_reader read_header, const char* unit) {
  auto item_file = std::make_unique<byte_file>(items);
  auto items_layout = read_header(*item_file, false);
  std::unique_ptr<byte_file> label_file;
  item_layout labels_layout;
  if (!labels.empty()) {
    label_file = std::make_unique<byte_file>(labels);
    labels_layout = read_header(*label_file, true);
  }
  return std::make_unique<paired_reader>(std::move(item_file), std::move(items_layout),
                                         std::move(label_file), std::move(labels_layout), unit);
}

} // namespace troupe::formats
