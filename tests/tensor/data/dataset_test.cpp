#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <boost/test/unit_test.hpp>
#include <zlib.h>

#include "tensor/core/error.hpp"
#include "tensor/data/dataset.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path()
           / ("troupe-idx-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static inline int counter = 0;
};

void put_u32(std::vector<unsigned char>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<unsigned char>(v >> shift));
}

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  BOOST_REQUIRE(f);
  if (!bytes.empty())
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// n images of 2x3 pixels: pixel value = image index * 10 + pixel index.
std::vector<unsigned char> images_file(uint32_t n, uint32_t magic = 2051) {
  std::vector<unsigned char> out;
  put_u32(out, magic);
  put_u32(out, n);
  put_u32(out, 2);
  put_u32(out, 3);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t p = 0; p < 6; ++p)
      out.push_back(static_cast<unsigned char>(i * 10 + p));
  return out;
}

std::vector<unsigned char> labels_file(uint32_t n, uint32_t magic = 2049) {
  std::vector<unsigned char> out;
  put_u32(out, magic);
  put_u32(out, n);
  for (uint32_t i = 0; i < n; ++i)
    out.push_back(static_cast<unsigned char>(i % 10));
  return out;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const data_error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The peak resident memory of this process so far (VmHWM), in MiB.
double peak_resident_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024;
  return 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(idx)

BOOST_AUTO_TEST_CASE(reads_a_good_file) {
  temp_dir d;
  write_gz(d.file("img.gz"), images_file(5));
  write_gz(d.file("lbl.gz"), labels_file(5));
  auto data = load_idx(d.file("img.gz"), d.file("lbl.gz"));
  BOOST_TEST(data.size() == 5u);
  BOOST_TEST(data.features() == 6);
  BOOST_TEST(data.images[2 * 6 + 1] == 21.0f / 255.0f);
  BOOST_TEST(data.labels[3] == 3);
}

BOOST_AUTO_TEST_CASE(truncated_file_is_named) {
  temp_dir d;
  auto bytes = images_file(5);
  bytes.resize(bytes.size() - 7);
  write_gz(d.file("img.gz"), bytes);
  write_gz(d.file("lbl.gz"), labels_file(5));
  auto msg = error_of([&] { load_idx(d.file("img.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "img.gz"));
  BOOST_TEST(contains(msg, "truncated"));
}

BOOST_AUTO_TEST_CASE(wrong_magic_is_named) {
  temp_dir d;
  write_gz(d.file("img.gz"), images_file(5, 2049));
  write_gz(d.file("lbl.gz"), labels_file(5));
  auto msg = error_of([&] { load_idx(d.file("img.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "img.gz"));
  BOOST_TEST(contains(msg, "wrong magic number 2049"));
  write_gz(d.file("img.gz"), images_file(5));
  write_gz(d.file("lbl.gz"), labels_file(5, 7));
  msg = error_of([&] { load_idx(d.file("img.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "lbl.gz"));
}

BOOST_AUTO_TEST_CASE(missing_corrupt_and_mismatched_files) {
  temp_dir d;
  auto msg = error_of([&] { load_idx(d.file("nope.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "nope.gz"));
  BOOST_TEST(contains(msg, "cannot open"));
  // A gzip header followed by garbage.
  {
    std::FILE* f = std::fopen(d.file("bad.gz").c_str(), "wb");
    const unsigned char junk[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2};
    std::fwrite(junk, 1, sizeof(junk), f);
    std::fclose(f);
  }
  write_gz(d.file("lbl.gz"), labels_file(5));
  msg = error_of([&] { load_idx(d.file("bad.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "bad.gz"));
  write_gz(d.file("img.gz"), images_file(5));
  write_gz(d.file("lbl4.gz"), labels_file(4));
  msg = error_of([&] { load_idx(d.file("img.gz"), d.file("lbl4.gz")); });
  BOOST_TEST(contains(msg, "4 labels"));
  auto missing = check_mnist_dir(d.path.string());
  BOOST_REQUIRE(missing);
  BOOST_TEST(contains(missing->message, "train-images-idx3-ubyte.gz is missing"));
}

// A header that claims far more items than the file holds: the reader's
// memory follows the data, and the error names the claim.
BOOST_AUTO_TEST_CASE(a_header_claiming_more_than_the_file_holds_is_not_trusted) {
  temp_dir d;
  auto bytes = images_file(5);
  bytes[4] = 0x40; // the count: 0x40000005 images of 6 pixels, 6 GiB claimed
  write_gz(d.file("img.gz"), bytes);
  write_gz(d.file("lbl.gz"), labels_file(5));
  auto before = peak_resident_mib();
  auto msg = error_of([&] { load_idx(d.file("img.gz"), d.file("lbl.gz")); });
  BOOST_TEST(contains(msg, "truncated: its header claims 1073741829 images"), msg);
  BOOST_TEST(peak_resident_mib() - before < 64.0);
  write_gz(d.file("empty.gz"), images_file(0));
  BOOST_TEST(contains(error_of([&] { load_idx(d.file("empty.gz"), d.file("lbl.gz")); }),
                      "holds no examples"));
}

BOOST_AUTO_TEST_CASE(labels_and_features_are_checked_before_training) {
  temp_dir d;
  write_gz(d.file("img.gz"), images_file(5));
  auto labels = labels_file(5);
  labels.back() = 200; // example 4: label 200 of 10 classes
  write_gz(d.file("lbl.gz"), labels);
  auto data = load_idx(d.file("img.gz"), d.file("lbl.gz"));
  auto msg = error_of([&] { check_dataset(data, 10, "train"); });
  BOOST_TEST(contains(msg, "train: example 4 has label 200, but the model has 10 classes"), msg);
  data.labels.back() = 4;
  BOOST_TEST(error_of([&] { check_dataset(data, 10, "train"); }) == "no error");
  data.images[7] = std::nanf("");
  BOOST_TEST(contains(error_of([&] { check_dataset(data, 10, "train"); }),
                      "example 1 has a feature that is not finite"));
  BOOST_TEST(
    contains(error_of([&] { check_dataset(dataset{}, 10, "test"); }), "test holds no examples"));
}

BOOST_AUTO_TEST_SUITE_END()
