// The data path's speed, printed side by side in one run:
//   1. each reader's records/s on Fashion-MNIST's 60000 training examples,
//      written here as IDX (gzipped and plain), CSV (plain and gzipped) and
//      .npy;
//   2. a worker's training examples/s streaming its data from disk (reader
//      thread, shuffle buffer, prefetch) against the same examples held in
//      memory, for a light model (softmax, where reading matters most), the
//      MLP and the CNN; the ratio is the target (>= 0.95);
//   3. the stream's memory: peak resident growth while streaming.
//   build/bin/troupe-bench-data [FASHION_MNIST_DIR] [SECONDS_PER_RUN]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <zlib.h>

#include "tensor/data/stream.hpp"
#include "tensor/nn/model.hpp"

using namespace troupe;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double resident_mib(const char* key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0)
      return std::stod(line.substr(std::string(key).size())) / 1024;
  return 0;
}

void write_file(const std::string& path, const std::string& bytes, bool gzip) {
  if (!gzip) {
    std::ofstream(path, std::ios::binary) << bytes;
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb6");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// The raw uint8 pixels and labels, from the catalogued IDX set.
struct raw_set {
  std::vector<unsigned char> pixels, labels;
  size_t features = 784;
};

raw_set read_raw(const std::string& dir) {
  auto reader = open_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  raw_set out;
  raw_record r;
  while (reader->next(r)) {
    for (float v : r.features)
      out.pixels.push_back(static_cast<unsigned char>(v));
    out.labels.push_back(static_cast<unsigned char>(r.label));
  }
  return out;
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() & 0xff)
         + static_cast<char>(h.size() >> 8) + h;
}

// (name, data options) per format.
using data_formats = std::vector<std::pair<std::string, data_options>>;

// Writes the set in every format.
data_formats write_formats(const raw_set& s, const std::string& dir) {
  auto n = static_cast<uint32_t>(s.labels.size());
  std::string idx_images = be32(2051) + be32(n) + be32(28) + be32(28);
  idx_images.append(s.pixels.begin(), s.pixels.end());
  std::string idx_labels = be32(2049) + be32(n);
  idx_labels.append(s.labels.begin(), s.labels.end());
  write_file(dir + "/img.idx", idx_images, false);
  write_file(dir + "/lbl.idx", idx_labels, false);
  write_file(dir + "/img.idx.gz", idx_images, true);
  write_file(dir + "/lbl.idx.gz", idx_labels, true);
  std::string csv = "label";
  for (size_t f = 0; f < s.features; ++f)
    csv += ",p" + std::to_string(f);
  csv += "\n";
  for (size_t i = 0; i < n; ++i) {
    csv += std::to_string(s.labels[i]);
    for (size_t f = 0; f < s.features; ++f)
      csv += "," + std::to_string(s.pixels[i * s.features + f]);
    csv += "\n";
  }
  write_file(dir + "/train.csv", csv, false);
  write_file(dir + "/train.csv.gz", csv, true);
  write_file(dir + "/img.npy",
             npy_header("|u1", "(" + std::to_string(n) + ", 28, 28)")
               + std::string(s.pixels.begin(), s.pixels.end()),
             false);
  write_file(dir + "/lbl.npy",
             npy_header("|u1", "(" + std::to_string(n) + ",)")
               + std::string(s.labels.begin(), s.labels.end()),
             false);
  auto options = [&](std::vector<std::string> train, std::vector<std::string> labels) {
    data_options o;
    o.train = o.test = train; // the test split reads the same files
    o.train_labels = o.test_labels = labels;
    o.classes = 10;
    if (train[0].find(".csv") != std::string::npos) {
      o.normalize = normalization::scale;
      o.scale = 1.0 / 255.0;
    }
    return o;
  };
  return {{"idx", options({dir + "/img.idx"}, {dir + "/lbl.idx"})},
          {"idx.gz", options({dir + "/img.idx.gz"}, {dir + "/lbl.idx.gz"})},
          {"npy", options({dir + "/img.npy"}, {dir + "/lbl.npy"})},
          {"csv", options({dir + "/train.csv"}, {})},
          {"csv.gz", options({dir + "/train.csv.gz"}, {})}};
}

// Records/s of one pass through every file of the split (example_source:
// parsing, checks, normalisation).
double reader_rate(std::shared_ptr<const data_split> split) {
  std::vector<float> x(static_cast<size_t>(split->features()));
  int32_t label;
  float target;
  uint64_t n = 0;
  auto start = clock_type::now();
  for (size_t f = 0; f < split->files.size(); ++f) {
    example_source source(split, f);
    while (source.next(x.data(), label, target))
      ++n;
  }
  return static_cast<double>(n) / seconds_since(start);
}

// A worker's loop for `seconds`: the next batch, then a training step.
double training_rate(model& net, example_stream& stream, double seconds, size_t batch_size) {
  auto params = initial_values(net, 1);
  std::vector<tensor> grads;
  batch b;
  for (int warm = 0; warm < 5; ++warm) {
    stream.next_batch(b);
    net.train_step(params, b, grads);
  }
  uint64_t examples = 0;
  auto start = clock_type::now();
  while (seconds_since(start) < seconds) {
    stream.next_batch(b);
    net.train_step(params, b, grads);
    examples += batch_size;
  }
  return static_cast<double>(examples) / seconds_since(start);
}

// 1. Each reader's rate over the training set; returns the IDX split.
std::shared_ptr<const data_split> measure_readers(const data_formats& formats) {
  std::printf("\n1. readers (one pass, parse + check + normalise), records/s:\n");
  std::shared_ptr<const data_split> idx_split;
  for (auto& [name, options] : formats) {
    auto catalog = catalog_data(options, "");
    if (name == "idx")
      idx_split = catalog.train;
    auto bytes = fs::file_size(catalog.train->files[0].features);
    std::printf("  %-7s %10.0f records/s  (file %.1f MB)\n", name.c_str(),
                reader_rate(catalog.train), static_cast<double>(bytes) / 1e6);
  }
  return idx_split;
}

// 2. A worker's training rate from disk (IDX and CSV) beside from memory.
void measure_training(const data_formats& formats, const std::shared_ptr<const data_split>& idx,
                      double seconds) {
  std::printf("\n2. a worker training from disk vs from memory (batch 100, %.0f s each), "
              "examples/s:\n",
              seconds);
  auto in_memory = split_in_memory(std::make_shared<const dataset>(load_all(idx)), "training set");
  stream_options options;
  options.batch_size = 100;
  for (auto kind : {model_kind::softmax, model_kind::mlp, model_kind::cnn}) {
    model_options m;
    m.input = kind == model_kind::cnn ? shape_t{28, 28, 1} : shape_t{784};
    auto net = make_model(kind, m);
    example_stream memory(in_memory, options);
    double from_memory = training_rate(*net, memory, seconds, options.batch_size);
    for (auto& [format, data] : formats) {
      if (format != "idx" && format != "csv")
        continue;
      auto split = catalog_data(data, "").train;
      example_stream disk(split, options);
      double from_disk = training_rate(*net, disk, seconds, options.batch_size);
      std::printf("  %-8s memory %9.0f   disk (%s) %9.0f   ratio %.3f\n", name_of(kind),
                  from_memory, format.c_str(), from_disk, from_disk / from_memory);
    }
  }
}

// 3. The memory a worker reading the CSV holds, with shuffle buffer `buffer`
// (0: the automatic buffer: the whole share, 179 MiB here, fits 256 MiB and
// is kept after one read; 10000: a bounded buffer that streams every epoch).
void measure_memory(const data_options& csv, size_t buffer, const raw_set& raw) {
  stream_options bounded;
  bounded.batch_size = 100;
  bounded.shuffle_buffer = buffer;
  std::ofstream("/proc/self/clear_refs") << "5";
  double before = resident_mib("VmRSS:");
  auto split = catalog_data(csv, "").train;
  auto start = clock_type::now();
  example_stream disk(split, bounded);
  batch b;
  disk.next_batch(b);
  double first = seconds_since(start);
  for (int i = 1; i < 700; ++i) // more than an epoch
    disk.next_batch(b);
  double growth = resident_mib("VmHWM:") - before;
  size_t held = disk.buffer_examples();
  double bound = (static_cast<double>(held)
                  + static_cast<double>(bounded.prefetch + 2) * bounded.batch_size)
                 * 784 * 4 / (1 << 20);
  std::printf("\n3. memory reading the CSV for more than an epoch (shuffle buffer %zu: %zu "
              "examples held%s, prefetch %zu):\n",
              buffer, held, disk.resident() ? ", the whole share, read once" : "",
              bounded.prefetch);
  std::printf("  first batch after %.2f s; peak growth %.1f MiB; the stated bound %.1f MiB + "
              "read buffers; the data as floats %.1f MiB\n",
              first, growth, bound, static_cast<double>(raw.pixels.size()) * 4 / (1 << 20));
}

} // namespace

int main(int argc, char** argv) {
  std::string fmnist = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  double seconds = argc > 2 ? std::stod(argv[2]) : 4.0;
  auto dir = fs::temp_directory_path() / ("troupe-bench-data-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto raw = read_raw(fmnist);
  std::printf("data set: Fashion-MNIST training set, %zu examples of %zu values\n",
              raw.labels.size(), raw.features);
  auto formats = write_formats(raw, dir.string());
  auto idx_split = measure_readers(formats);
  measure_training(formats, idx_split, seconds);
  for (size_t buffer : {size_t{0}, size_t{10000}})
    measure_memory(formats[3].second, buffer, raw);
  fs::remove_all(dir);
  return 0;
}
