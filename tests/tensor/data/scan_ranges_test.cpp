// A text file scanned in byte ranges on several threads (catalog_steps.hpp,
// scan_file): ranges that meet read every line once, whatever byte they
// split at; the counts of a split scan equal a single reader's for Criteo,
// libsvm and CSV (with and without a header), blank, CRLF and bad lines
// included; a bad record under data.bad-records = fail is named as a single
// reader names it; a gzipped file is read whole.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

#include <zlib.h>

#include "tensor/data/catalog_steps.hpp"
#include "tensor/data/line_file.hpp"
#include "tests/support/data_files.hpp"
#include "tests/support/errors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

std::vector<std::string> lines_in(const std::string& path, uint64_t begin, uint64_t end) {
  formats::line_file file(path, "");
  BOOST_REQUIRE(file.restrict_to(begin, end));
  std::vector<std::string> out;
  while (file.next_line())
    out.push_back(file.line());
  return out;
}

// A Criteo, libsvm or CSV text of `n` records, some blank lines between
// them, some ending in CRLF, and every `bad_every`th record bad (0: none).
std::string make_text(data_format format, bool header, int n, int bad_every, uint32_t seed) {
  std::mt19937 random(seed);
  auto pick = [&](int k) { return static_cast<int>(random() % static_cast<unsigned>(k)); };
  std::string text = header ? "a,b,c,label\n" : "";
  for (int i = 0; i < n; ++i) {
    bool bad = bad_every > 0 && i % bad_every == bad_every - 1;
    std::string line;
    if (format == data_format::criteo) {
      line = std::to_string(pick(2));
      for (int f = 0; f < 13; ++f)
        line += "\t" + (pick(4) == 0 ? std::string() : std::to_string(pick(1000)));
      for (int f = 0; f < 26; ++f)
        line += "\t" + (pick(5) == 0 ? std::string() : std::to_string(100000 + pick(900000)));
      if (bad)
        line = "1\tnot-a-number";
    } else if (format == data_format::libsvm) {
      line = pick(2) ? "+1" : "-1";
      for (int k = 0, keys = 1 + pick(4); k < keys; ++k)
        line += " " + std::to_string(1 + pick(50)) + ":" + std::to_string(pick(100) / 10.0);
      if (bad)
        line = "1 seven:x";
    } else {
      line = std::to_string(pick(100)) + "," + std::to_string(pick(7)) + ".5,"
             + std::to_string(pick(9)) + "," + std::to_string(pick(3));
      if (bad)
        line = "1,2,three,0";
    }
    text += line + (pick(7) == 0 ? "\r\n" : "\n");
    if (pick(11) == 0)
      text += pick(2) ? "\n" : "  \n";
  }
  return text;
}

data_split split_of(data_format format, const std::string& path, bool header,
                    bad_record_policy policy) {
  data_split split;
  split.name = "training set";
  split.format = format;
  split.csv.header = header;
  split.csv.label_column = header ? "label" : "";
  split.bad_records = policy;
  split.files.push_back({path, "", 0, 0});
  return split;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scan_ranges)

// Two ranges split at every byte of a small file: every line once, in order.
BOOST_AUTO_TEST_CASE(ranges_that_meet_read_every_line_once_wherever_they_split) {
  temp_dir d;
  std::string text = "first\n\nthird line\r\nx\n\nlast without an end";
  write_text(d.file("lines.txt"), text);
  auto all = lines_in(d.file("lines.txt"), 0, text.size());
  BOOST_TEST_REQUIRE(all.size() == 6u);
  for (uint64_t at = 0; at <= text.size(); ++at) {
    auto lines = lines_in(d.file("lines.txt"), 0, at);
    auto rest = lines_in(d.file("lines.txt"), at, text.size());
    lines.insert(lines.end(), rest.begin(), rest.end());
    BOOST_TEST((lines == all), "split at byte " << at);
  }
}

// The counts a split scan adds up are a single reader's, for each text
// format, whatever the number of ranges.
BOOST_AUTO_TEST_CASE(a_split_scan_counts_what_a_single_reader_counts) {
  temp_dir d;
  struct kind {
    data_format format;
    bool header;
  };
  for (auto k : {kind{data_format::criteo, false}, kind{data_format::libsvm, false},
                 kind{data_format::csv, true}, kind{data_format::csv, false}}) {
    auto path = d.file(std::string("data-") + name_of(k.format) + (k.header ? "-h" : ""));
    write_text(path, make_text(k.format, k.header, 3000, 97, 5));
    auto split = split_of(k.format, path, k.header, bad_record_policy::skip);
    auto whole = catalog_steps::scan_file(split, split.files[0], {1, 0});
    BOOST_TEST_REQUIRE(whole.records > 3000u - 40u);
    BOOST_TEST(whole.bad_rows == 30u);
    for (unsigned ranges : {2u, 3u, 7u, 64u}) {
      auto part = catalog_steps::scan_file(split, split.files[0], {ranges, 1});
      BOOST_TEST(part.records == whole.records, name_of(k.format) << " in " << ranges);
      BOOST_TEST(part.bad_rows == whole.bad_rows);
      BOOST_TEST((part.label_counts == whole.label_counts));
      BOOST_TEST((part.item_shape == whole.item_shape));
      BOOST_TEST((part.keys == whole.keys));
      BOOST_TEST(part.label_column == whole.label_column);
    }
  }
}

// With data.bad-records = fail, the first bad record is named as a single
// reader names it, by its line in the whole file.
BOOST_AUTO_TEST_CASE(a_bad_record_is_named_by_its_line_in_the_whole_file) {
  temp_dir d;
  auto path = d.file("bad.tsv");
  write_text(path, make_text(data_format::criteo, false, 2000, 1500, 9));
  auto split = split_of(data_format::criteo, path, false, bad_record_policy::fail);
  auto message = [&](unsigned ranges) {
    try {
      catalog_steps::scan_file(split, split.files[0], {ranges, 1});
    } catch (const data_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto single = message(1);
  BOOST_TEST(contains(single, "bad.tsv line "), single);
  BOOST_TEST(message(4) == single);
}

// A gzipped file cannot be reached by offset: it is read whole, alike.
BOOST_AUTO_TEST_CASE(a_gzipped_file_is_read_whole) {
  temp_dir d;
  auto text = make_text(data_format::libsvm, false, 500, 0, 3);
  auto path = d.file("data.svm.gz");
  gzFile out = gzopen(path.c_str(), "wb");
  gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  gzclose(out);
  auto split = split_of(data_format::libsvm, path, false, bad_record_policy::fail);
  formats::line_file file(path, "");
  BOOST_TEST(!file.restrict_to(0, 10));
  auto scan = catalog_steps::scan_file(split, split.files[0], {4, 1});
  BOOST_TEST(scan.records == catalog_steps::scan_file(split, split.files[0], {1, 0}).records);
  BOOST_TEST(scan.records >= 500u);
}

BOOST_AUTO_TEST_SUITE_END()
