#include <cmath>

#include <boost/test/unit_test.hpp>

#include "tensor/data/formats.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

std::vector<raw_record> read_all(record_reader& r) {
  std::vector<raw_record> out;
  raw_record rec;
  while (r.next(rec)) {
    out.push_back(rec);
    out.back().label_text = {}; // views die with the next read
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(idx_files)

BOOST_AUTO_TEST_CASE(reads_gzipped_and_plain_files_and_seeks) {
  temp_dir d;
  write_idx_pair(d.file("img.gz"), d.file("lbl.gz"), 5);
  write_idx_pair(d.file("img"), d.file("lbl"), 5, false);
  for (auto [img, lbl] : {std::pair{"img.gz", "lbl.gz"}, std::pair{"img", "lbl"}}) {
    auto r = open_idx(d.file(img), d.file(lbl));
    BOOST_TEST(r->features() == 6);
    BOOST_TEST((r->item_shape() == shape_t{2, 3}));
    BOOST_TEST(r->declared_records() == 5);
    BOOST_TEST(r->holds_bytes());
    auto all = read_all(*r);
    BOOST_REQUIRE(all.size() == 5u);
    BOOST_TEST(all[2].features[1] == 21.0f); // raw: normalising is the catalog's
    BOOST_TEST(all[3].label == 3);
    r->seek(4);
    raw_record rec;
    BOOST_REQUIRE(r->next(rec));
    BOOST_TEST(rec.features[0] == 40.0f);
    BOOST_TEST(!r->next(rec));
  }
}

BOOST_AUTO_TEST_CASE(items_of_rank_one_and_float_items) {
  temp_dir d;
  // float32, 3 items of rank 1 (4 values), big-endian.
  std::vector<unsigned char> bytes = {0, 0, 0x0D, 2};
  put_u32(bytes, 3);
  put_u32(bytes, 4);
  for (int i = 0; i < 12; ++i) {
    float v = 0.5f * static_cast<float>(i);
    uint32_t u;
    std::memcpy(&u, &v, 4);
    put_u32(bytes, u);
  }
  write_bytes(d.file("f.idx"), bytes);
  write_bytes(d.file("l.idx"), idx_labels(3));
  auto r = open_idx(d.file("f.idx"), d.file("l.idx"));
  BOOST_TEST((r->item_shape() == shape_t{4}));
  BOOST_TEST(!r->holds_bytes());
  auto all = read_all(*r);
  BOOST_TEST(all[2].features[3] == 5.5f);
  // A NaN is a bad record, named.
  float nan = std::nanf("");
  uint32_t u;
  std::memcpy(&u, &nan, 4);
  bytes.resize(bytes.size() - 4);
  put_u32(bytes, u);
  write_bytes(d.file("f.idx"), bytes);
  r = open_idx(d.file("f.idx"), d.file("l.idx"));
  raw_record rec;
  BOOST_TEST(r->next(rec));
  BOOST_TEST(r->next(rec));
  try {
    r->next(rec);
    BOOST_FAIL("a NaN was read");
  } catch (const bad_record& e) {
    BOOST_TEST(contains(e.what(), "f.idx item 2: value 3 is not finite"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(truncated_wrong_and_mismatched_files_are_named) {
  temp_dir d;
  auto bytes = idx_images(5);
  bytes.resize(bytes.size() - 7);
  write_bytes(d.file("short"), bytes);
  write_bytes(d.file("lbl"), idx_labels(5));
  auto msg = error_of([&] { open_idx(d.file("short"), d.file("lbl")); });
  BOOST_TEST(contains(msg, "short: truncated: its header claims 5 records, but the file ends "
                           "within record 3"),
             msg);
  write_gz(d.file("short.gz"), bytes);
  auto r = open_idx(d.file("short.gz"), d.file("lbl")); // gzip: found while reading
  msg = error_of([&] { read_all(*r); });
  BOOST_TEST(contains(msg, "short.gz: truncated"), msg);
  write_bytes(d.file("img"), idx_images(5));
  write_bytes(d.file("lbl4"), idx_labels(4));
  BOOST_TEST(contains(error_of([&] { open_idx(d.file("img"), d.file("lbl4")); }), "4 labels"));
  BOOST_TEST(contains(error_of([&] { open_idx(d.file("lbl"), d.file("img")); }),
                      "an IDX item file with 1 dimensions"));
  BOOST_TEST(
    contains(error_of([&] { open_idx(d.file("nope"), d.file("lbl")); }), "nope: cannot open"));
  write_text(d.file("text"), "label,a\n1,2\n");
  BOOST_TEST(
    contains(error_of([&] { open_idx(d.file("text"), d.file("lbl")); }), "not an IDX file"));
  write_bytes(d.file("empty"), idx_images(0));
  BOOST_TEST(
    contains(error_of([&] { open_idx(d.file("empty"), d.file("lbl")); }), "holds no records"));
}

// A header claiming far more than the file holds: refused from the file's
// size before anything is allocated.
BOOST_AUTO_TEST_CASE(a_header_claiming_more_than_the_file_holds_is_not_trusted) {
  temp_dir d;
  auto bytes = idx_images(5);
  bytes[4] = 0x40; // 0x40000005 images claimed
  write_bytes(d.file("img"), bytes);
  auto labels = idx_labels(5);
  labels[4] = 0x40;
  write_bytes(d.file("lbl"), labels);
  auto before = peak_resident_mib();
  auto msg = error_of([&] { open_idx(d.file("img"), d.file("lbl")); });
  BOOST_TEST(contains(msg, "truncated: its header claims 1073741829 records"), msg);
  BOOST_TEST(peak_resident_mib() - before < 64.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(npy_files)

BOOST_AUTO_TEST_CASE(reads_float_and_byte_features_with_integer_labels) {
  temp_dir d;
  std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  write_bytes(d.file("x.npy"), npy("<f4", {3, 2}, raw_bytes(f32)));
  std::vector<int64_t> y = {2, 0, 1};
  write_bytes(d.file("y.npy"), npy("<i8", {3}, raw_bytes(y)));
  auto r = open_npy(d.file("x.npy"), d.file("y.npy"));
  BOOST_TEST((r->item_shape() == shape_t{2}));
  auto all = read_all(*r);
  BOOST_REQUIRE(all.size() == 3u);
  BOOST_TEST(all[1].features[1] == 4.0f);
  BOOST_TEST(all[0].label == 2);
  std::vector<double> f64 = {0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2};
  write_bytes(d.file("x64.npy"), npy("<f8", {2, 2, 2}, raw_bytes(f64)));
  std::vector<uint8_t> y8 = {7, 9};
  write_bytes(d.file("y8.npy"), npy("|u1", {2}, raw_bytes(y8)));
  r = open_npy(d.file("x64.npy"), d.file("y8.npy"));
  BOOST_TEST((r->item_shape() == shape_t{2, 2}));
  r->seek(1);
  raw_record rec;
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.features[3] == 2.0f);
  BOOST_TEST(rec.label == 9);
  std::vector<uint8_t> u8 = {0, 255, 128, 1};
  write_bytes(d.file("xu8.npy"), npy("|u1", {2, 2}, raw_bytes(u8)));
  r = open_npy(d.file("xu8.npy"), d.file("y8.npy"));
  BOOST_TEST(r->holds_bytes());
  BOOST_TEST(read_all(*r)[0].features[1] == 255.0f);
}

BOOST_AUTO_TEST_CASE(unsupported_truncated_and_mismatched_arrays_are_named) {
  temp_dir d;
  std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> y = {2, 0, 1};
  write_bytes(d.file("y.npy"), npy("<i8", {3}, raw_bytes(y)));
  auto x = npy("<f4", {3, 2}, raw_bytes(f32));
  x.resize(x.size() - 5);
  write_bytes(d.file("short.npy"), x);
  BOOST_TEST(contains(error_of([&] { open_npy(d.file("short.npy"), d.file("y.npy")); }),
                      "short.npy: truncated: its header claims 3 records, but the file ends "
                      "within record 2"));
  write_bytes(d.file("be.npy"), npy(">f4", {3, 2}, raw_bytes(f32)));
  BOOST_TEST(contains(error_of([&] { open_npy(d.file("be.npy"), d.file("y.npy")); }),
                      "element type '>f4' is not supported"));
  write_bytes(d.file("i4.npy"), npy("<i4", {3, 2}, raw_bytes(std::vector<int32_t>(6))));
  BOOST_TEST(contains(error_of([&] { open_npy(d.file("i4.npy"), d.file("y.npy")); }),
                      "save them as float32"));
  write_bytes(d.file("fo.npy"), npy("<f4", {3, 2}, raw_bytes(f32), true));
  BOOST_TEST(
    contains(error_of([&] { open_npy(d.file("fo.npy"), d.file("y.npy")); }), "Fortran-ordered"));
  write_bytes(d.file("x.npy"), npy("<f4", {3, 2}, raw_bytes(f32)));
  write_bytes(d.file("y2.npy"), npy("<i8", {2}, raw_bytes(std::vector<int64_t>{1, 2})));
  BOOST_TEST(
    contains(error_of([&] { open_npy(d.file("x.npy"), d.file("y2.npy")); }), "holds 2 labels but"));
  write_bytes(d.file("yf.npy"), npy("<f4", {3}, raw_bytes(std::vector<float>{1, 2, 3})));
  BOOST_TEST(contains(error_of([&] { open_npy(d.file("x.npy"), d.file("yf.npy")); }),
                      "labels must be integers"));
  write_text(d.file("junk.npy"), "not numpy at all");
  BOOST_TEST(
    contains(error_of([&] { open_npy(d.file("junk.npy"), d.file("y.npy")); }), "not a .npy file"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(csv_files)

BOOST_AUTO_TEST_CASE(header_label_by_name_or_index_and_delimiters) {
  temp_dir d;
  write_text(d.file("a.csv"), "x,label,y\n1.5,cat,2\n-3,dog,4e1\n\n+5, cat ,6\r\n");
  auto r = open_csv(d.file("a.csv"), csv_layout{});
  BOOST_TEST(r->features() == 2);
  BOOST_TEST(r->label_name() == "label");
  raw_record rec;
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.features[0] == 1.5f);
  BOOST_TEST(rec.label_text == "cat");
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.features[1] == 40.0f);
  BOOST_REQUIRE(r->next(rec)); // the blank line is no record
  BOOST_TEST(rec.features[0] == 5.0f);
  BOOST_TEST(rec.label_text == "cat");
  BOOST_TEST(!r->next(rec));
  r->seek(1);
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.label_text == "dog");

  write_text(d.file("b.tsv.csv.gz.txt"), "7\t1\t2\n8\t3\t4\n");
  csv_layout tabs;
  tabs.delimiter = '\t';
  tabs.header = false;
  tabs.label_column = "0";
  r = open_csv(d.file("b.tsv.csv.gz.txt"), tabs);
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.label_text == "7");
  BOOST_TEST(rec.features[1] == 2.0f);

  std::string gz = "id,v,label\n1,0.5,\"a, b\"\n2,1.5,\"say \"\"hi\"\"\"\n";
  write_gz(d.file("c.csv.gz"), {gz.begin(), gz.end()});
  csv_layout ignore;
  ignore.ignore_columns = {"id"};
  r = open_csv(d.file("c.csv.gz"), ignore);
  BOOST_TEST(r->features() == 1);
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.label_text == "a, b");
  BOOST_TEST(rec.features[0] == 0.5f);
  BOOST_REQUIRE(r->next(rec));
  BOOST_TEST(rec.label_text == "say \"hi\"");
}

BOOST_AUTO_TEST_CASE(bad_rows_are_named_by_line_and_column) {
  temp_dir d;
  write_text(d.file("bad.csv"),
             "a,b,label\n1,2,0\n1,2\n1,x,0\n1,nan,0\n1,inf,0\n1,2,0\n1,2,3,4\n,2,0\n");
  auto r = open_csv(d.file("bad.csv"), csv_layout{});
  raw_record rec;
  std::vector<std::string> problems;
  size_t good = 0;
  for (;;) {
    try {
      if (!r->next(rec))
        break;
      ++good;
    } catch (const bad_record& e) {
      problems.push_back(e.what());
    }
  }
  // The empty cell of line 9 reads NaN: the catalog's first pass counts
  // it, then fills it (data.missing-values); refused, it is a bad record.
  BOOST_TEST(good == 3u);
  BOOST_TEST(std::isnan(rec.features[0]));
  BOOST_REQUIRE(problems.size() == 5u);
  BOOST_TEST(contains(problems[0], "bad.csv line 3: 2 columns, expected 3"), problems[0]);
  BOOST_TEST(contains(problems[1], "bad.csv line 4, column 'b' (1): 'x' is not a number"));
  BOOST_TEST(contains(problems[2], "line 5, column 'b' (1): 'nan' is not finite"));
  BOOST_TEST(contains(problems[3], "line 6, column 'b' (1): 'inf' is not finite"));
  BOOST_TEST(contains(problems[4], "line 8: 4 columns"));
  csv_layout refuse;
  refuse.missing = missing_values::refuse;
  r = open_csv(d.file("bad.csv"), refuse);
  r->seek(7);
  auto msg = error_of([&] { r->next(rec); });
  BOOST_TEST(contains(msg, "line 9, column 'a' (0) is empty, and data.missing-values"), msg);
}

BOOST_AUTO_TEST_CASE(layout_problems_are_named) {
  temp_dir d;
  write_text(d.file("a.csv"), "x,y\n1,2\n");
  BOOST_TEST(contains(error_of([&] { open_csv(d.file("a.csv"), csv_layout{}); }),
                      "data.label-column = 'label' is not a column of its header (x, y)"));
  csv_layout by_index;
  by_index.label_column = "5";
  BOOST_TEST(
    contains(error_of([&] { open_csv(d.file("a.csv"), by_index); }), "the file has 2 columns"));
  csv_layout no_header;
  no_header.header = false;
  BOOST_TEST(contains(error_of([&] { open_csv(d.file("a.csv"), no_header); }),
                      "give the column's 0-based index"));
  write_text(d.file("empty.csv"), "");
  BOOST_TEST(
    contains(error_of([&] { open_csv(d.file("empty.csv"), csv_layout{}); }), "empty file"));
  write_text(d.file("only.csv"), "label\n1\n");
  BOOST_TEST(
    contains(error_of([&] { open_csv(d.file("only.csv"), csv_layout{}); }), "no feature columns"));
  BOOST_TEST((format_of_name("x.csv.gz") == data_format::csv));
  BOOST_TEST((format_of_name("x.npy") == data_format::npy));
  BOOST_TEST((format_of_name("train-images-idx3-ubyte.gz") == data_format::idx));
}

BOOST_AUTO_TEST_SUITE_END()
