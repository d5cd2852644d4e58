#include "tensor/data/dataset.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include <zlib.h>

#include "tensor/core/error.hpp"

namespace troupe {

namespace {

constexpr uint32_t images_magic = 2051;
constexpr uint32_t labels_magic = 2049;

// zlib reads plain files transparently, so .gz and raw IDX both work.
class gz_file {
public:
  explicit gz_file(const std::string& path) : path_(path) {
    std::ifstream probe(path);
    if (!probe)
      throw data_error(path
                       + ": cannot open (missing or unreadable); install "
                         "Debian's dataset-fashion-mnist or set train.data-dir");
    handle_ = gzopen(path.c_str(), "rb");
    if (!handle_)
      throw data_error(path + ": cannot open with zlib");
  }
  ~gz_file() {
    if (handle_)
      gzclose(handle_);
  }
  gz_file(const gz_file&) = delete;
  gz_file& operator=(const gz_file&) = delete;

  // Reads exactly n bytes or throws a data_error saying what is wrong.
  void read(void* out, size_t n, const char* what) {
    auto* dst = static_cast<unsigned char*>(out);
    size_t done = 0;
    while (done < n) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(handle_, dst + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(handle_, &code);
        throw data_error(path_ + ": corrupt file while reading " + what + " ("
                         + (msg ? msg : "zlib error") + ")");
      }
      if (got == 0)
        throw data_error(path_ + ": truncated: expected " + std::to_string(n) + " bytes of " + what
                         + ", got " + std::to_string(done));
      done += static_cast<size_t>(got);
    }
  }

  uint32_t read_u32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  const std::string& path() const { return path_; }

private:
  std::string path_;
  gzFile handle_ = nullptr;
};

void expect_magic(gz_file& f, uint32_t want) {
  auto magic = f.read_u32("the magic number");
  if (magic != want)
    throw data_error(f.path() + ": wrong magic number " + std::to_string(magic) + " (expected "
                     + std::to_string(want) + " for an IDX "
                     + (want == images_magic ? "image" : "label")
                     + " file); is this the right file?");
}

} // namespace

namespace {

// Reads `count` items of `item_bytes` bytes in pieces, so that memory grows
// with the data the file really holds, never with what its header claims.
std::vector<unsigned char> read_items(gz_file& f, uint32_t count, size_t item_bytes,
                                      const char* what) {
  constexpr size_t piece = size_t{1} << 20;
  size_t total = size_t{count} * item_bytes;
  std::vector<unsigned char> out;
  while (out.size() < total) {
    auto next = std::min(piece, total - out.size());
    auto at = out.size();
    out.resize(at + next);
    try {
      f.read(out.data() + at, next, what);
    } catch (const data_error&) {
      throw data_error(f.path() + ": truncated: its header claims " + std::to_string(count) + " "
                       + what + ", but the file holds fewer (ends within item "
                       + std::to_string(at / item_bytes) + ")");
    }
  }
  return out;
}

} // namespace

dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  dataset out;
  gz_file images(images_path);
  expect_magic(images, images_magic);
  auto count = images.read_u32("the image count");
  auto rows = images.read_u32("the row count");
  auto cols = images.read_u32("the column count");
  if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
    throw data_error(images_path + ": implausible image size " + std::to_string(rows) + "x"
                     + std::to_string(cols));
  if (count == 0)
    throw data_error(images_path + ": holds no examples");
  auto raw = read_items(images, count, size_t{rows} * cols, "images");
  gz_file labels(labels_path);
  expect_magic(labels, labels_magic);
  auto label_count = labels.read_u32("the label count");
  if (label_count != count)
    throw data_error(labels_path + ": holds " + std::to_string(label_count) + " labels but "
                     + images_path + " holds " + std::to_string(count) + " images");
  auto raw_labels = read_items(labels, count, 1, "labels");
  out.images = tensor({static_cast<int64_t>(count), static_cast<int64_t>(rows) * cols});
  constexpr float inv255 = 1.0f / 255.0f;
  for (size_t i = 0; i < raw.size(); ++i)
    out.images[i] = static_cast<float>(raw[i]) * inv255;
  out.labels.assign(raw_labels.begin(), raw_labels.end());
  return out;
}

void check_dataset(const dataset& data, int64_t classes, const std::string& what) {
  if (data.size() == 0)
    throw data_error(what + " holds no examples");
  if (data.images.rank() != 2 || data.images.dim(0) != static_cast<int64_t>(data.size()))
    throw data_error(what + ": " + std::to_string(data.size()) + " labels for images of shape "
                     + to_string(data.images.shape()));
  for (size_t i = 0; i < data.size(); ++i)
    if (data.labels[i] < 0 || data.labels[i] >= classes)
      throw data_error(what + ": example " + std::to_string(i) + " has label "
                       + std::to_string(data.labels[i]) + ", but the model has "
                       + std::to_string(classes) + " classes (0.." + std::to_string(classes - 1)
                       + ")");
  auto bad = data.images.first_non_finite();
  if (bad != data.images.size())
    throw data_error(what + ": example "
                     + std::to_string(bad / static_cast<size_t>(data.features()))
                     + " has a feature that is not finite");
}

dataset load_mnist_split(const std::string& dir, const std::string& split) {
  return load_idx(dir + "/" + split + "-images-idx3-ubyte.gz",
                  dir + "/" + split + "-labels-idx1-ubyte.gz");
}

uint32_t idx_item_count(const std::string& path) {
  gz_file f(path);
  auto magic = f.read_u32("the magic number");
  if (magic != images_magic && magic != labels_magic)
    throw data_error(path + ": wrong magic number " + std::to_string(magic)
                     + " (not an IDX image or label file)");
  return f.read_u32("the item count");
}

maybe_failure check_mnist_dir(const std::string& dir) {
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::ifstream probe(dir + "/" + name);
    if (!probe)
      return failure{errc::invalid_setting, dir + "/" + name + " is missing"};
  }
  return std::nullopt;
}

void copy_batch(const dataset& data, size_t first, size_t count, batch& out) {
  count = std::min(count, data.size() - std::min(first, data.size()));
  auto features = data.features();
  out.images.resize({static_cast<int64_t>(count), features});
  std::memcpy(out.images.data(), data.images.data() + first * features,
              count * features * sizeof(float));
  out.labels.assign(data.labels.begin() + first, data.labels.begin() + first + count);
}

} // namespace troupe
