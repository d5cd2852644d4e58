#include <cmath>

#include <filesystem>

#include <sys/stat.h>

#include <boost/test/unit_test.hpp>

#include "tensor/data/catalog.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

data_options csv_options(const temp_dir& d, std::vector<std::string> train, std::string test) {
  data_options o;
  o.normalize = normalization::none; // the values as written
  for (auto& t : train)
    o.train.push_back(d.file(t));
  o.test = {d.file(test)};
  return o;
}

// train.csv and test.csv in d with these texts, as [data] names them.
data_options train_and_test_csv(const temp_dir& d, const std::string& train,
                                const std::string& test) {
  write_text(d.file("train.csv"), train);
  write_text(d.file("test.csv"), test);
  return csv_options(d, {"train.csv"}, "test.csv");
}

} // namespace

BOOST_AUTO_TEST_SUITE(catalogs)

BOOST_AUTO_TEST_CASE(idx_sets_are_scaled_and_shaped_like_images) {
  temp_dir d;
  write_idx_pair(d.file("train-images-idx3-ubyte.gz"), d.file("train-labels-idx1-ubyte.gz"), 12);
  write_idx_pair(d.file("t10k-images-idx3-ubyte.gz"), d.file("t10k-labels-idx1-ubyte.gz"), 4);
  auto c = catalog_data({}, d.path.string()); // no [data]: the Fashion-MNIST layout
  BOOST_TEST((c.train->item_shape == shape_t{2, 3, 1}));
  BOOST_TEST(c.train->classes == 10);
  BOOST_TEST(c.train->usable_records() == 12u);
  BOOST_TEST(c.test->usable_records() == 4u);
  BOOST_TEST((c.train->norm.kind == normalization::scale));
  auto test = load_all(c.test);
  BOOST_TEST(test.images[2 * 6 + 1] == 21.0f * (1.0f / 255.0f));
  BOOST_TEST(test.labels[3] == 3);
  auto json = describe_json(c);
  BOOST_TEST(contains(json, "\"input_shape\":[2,3,1],\"classes\":10"), json);
}

BOOST_AUTO_TEST_CASE(string_labels_become_sorted_classes_and_test_labels_must_exist) {
  temp_dir d;
  auto o = train_and_test_csv(d, "a,species\n1,versicolor\n2,setosa\n3,virginica\n4,setosa\n",
                              "a,species\n1,setosa\n2,virginica\n");
  o.csv.label_column = "species";
  auto c = catalog_data(o, "");
  BOOST_TEST(
    (c.train->label_names == std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  BOOST_TEST(c.train->classes == 3);
  auto test = load_all(c.test);
  BOOST_TEST((test.labels == std::vector<int32_t>{0, 2}));
  BOOST_TEST(
    contains(describe_json(c), "\"label_names\":[\"setosa\",\"versicolor\",\"virginica\"]"));
  write_text(d.file("test.csv"), "a,species\n1,setosa\n2,daisy\n");
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "test.csv line 3: label 'daisy' is not one of the 3 classes"), msg);
  // Given names fix the order; a training label outside them is bad.
  o.label_names = {"virginica", "setosa", "versicolor"};
  write_text(d.file("test.csv"), "a,species\n1,setosa\n");
  c = catalog_data(o, "");
  BOOST_TEST(load_all(c.test).labels[0] == 1);
}

BOOST_AUTO_TEST_CASE(integer_labels_give_the_class_count_or_are_checked_against_it) {
  temp_dir d;
  auto o = train_and_test_csv(d, "label,x\n0,1\n4,2\n2,3\n", "label,x\n4,1\n");
  // Classes 1 and 3 never occur: refused unless data.classes says there are 5.
  auto gap = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(gap, "the labels run 0..4 but no record has class 1, 3"), gap);
  BOOST_TEST(contains(gap, "set data.classes = 5"), gap);
  o.classes = 5;
  BOOST_TEST(catalog_data(o, "").train->classes == 5);
  o.classes = 3;
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "train.csv line 3: label '4' is not one of the 3 classes (0..2)"), msg);
  write_text(d.file("train.csv"), "label,x\n0,1\n4444444444444,2\n");
  o.classes = 0;
  msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "the largest label is 4444444444444, more than 65536 classes"), msg);
  o.classes = 3; // bounded: the large label is a bad record
  o.bad_records = bad_record_policy::skip;
  write_text(d.file("test.csv"), "label,x\n0,1\n");
  BOOST_TEST(catalog_data(o, "").train->usable_records() == 1u);
  o.bad_records = bad_record_policy::fail;
  write_text(d.file("train.csv"), "label,x\n-1,1\n0,2\n1,2\n");
  o.classes = 0;
  msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "line 2: label '-1'"), msg);
}

// Issue 25: 61 of 60,000 training labels set to 200 made a 201-class model
// that ran to "ok":true. Classes that never occur are refused, naming them
// and the strays, unless data.classes says so.
BOOST_AUTO_TEST_CASE(labels_with_gaps_are_refused_naming_the_missing_classes) {
  temp_dir d;
  std::string text = "label,x\n";
  for (int i = 0; i < 600; ++i)
    text += std::to_string(i % 10) + ",1\n";
  for (int i = 0; i < 6; ++i)
    text += "200,1\n";
  auto o = train_and_test_csv(d, text, "label,x\n0,1\n");
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "the labels run 0..200 but no record has class 10, 11, 12"), msg);
  BOOST_TEST(contains(msg, "(190 in all)"), msg);
  BOOST_TEST(contains(msg, "labels above the gap: 200 (6 records)"), msg);
  o.classes = 201; // meant: trains on
  BOOST_TEST(catalog_data(o, "").train->classes == 201);
}

// A data file must be a regular file: a FIFO would block the task (read
// whole, more than once), a directory is no data.
BOOST_AUTO_TEST_CASE(fifos_and_directories_are_refused_as_data_files) {
  temp_dir d;
  write_text(d.file("test.csv"), "x,label\n1,0\n");
  BOOST_REQUIRE(::mkfifo(d.file("pipe.csv").c_str(), 0600) == 0);
  auto o = csv_options(d, {"pipe.csv"}, "test.csv");
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }), "is a FIFO (named pipe), not a"));
  std::filesystem::create_directory(d.file("dir.csv"));
  o = csv_options(d, {"dir.csv"}, "test.csv");
  BOOST_TEST(
    contains(error_of([&] { catalog_data(o, ""); }), "is a directory, not a regular file"));
  o = csv_options(d, {"*.csv"}, "test.csv"); // a glob that matches them
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }), "not a regular file"));
}

BOOST_AUTO_TEST_CASE(bad_records_fail_or_are_skipped_and_counted_per_file) {
  temp_dir d;
  write_text(d.file("p0.csv"), "x,y,label\n1,2,0\n1,oops,1\n3,4,1\n");
  write_text(d.file("p1.csv"), "x,y,label\n1,2,0\n5,6,1\n1,2\n9,9,7\n");
  write_text(d.file("test.csv"), "x,y,label\n1,2,0\n");
  auto o = csv_options(d, {"p*.csv"}, "test.csv");
  o.classes = 2;
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "p0.csv line 3, column 'y' (1): 'oops' is not a number"), msg);
  BOOST_TEST(contains(msg, "data.bad-records = skip"), msg);
  o.bad_records = bad_record_policy::skip;
  auto c = catalog_data(o, "");
  BOOST_REQUIRE(c.train->files.size() == 2u);
  BOOST_TEST(c.train->files[0].records == 3u);
  BOOST_TEST(c.train->files[0].bad == 1u);
  BOOST_TEST(c.train->files[1].bad == 2u); // the short row and label 7 of 2 classes
  BOOST_TEST(c.train->usable_records() == 4u);
  auto json = describe_json(c);
  BOOST_TEST(contains(json, "p1.csv\",\"records\":4,\"bad_records\":2"), json);
  auto train = load_all(c.train);
  BOOST_TEST(train.size() == 4u);
  BOOST_TEST(train.images[2 * 2 + 1] == 2.0f);
}

BOOST_AUTO_TEST_CASE(globs_empty_files_and_disagreeing_files_are_named) {
  temp_dir d;
  write_text(d.file("test.csv"), "x,label\n1,0\n");
  auto o = csv_options(d, {"none-*.csv"}, "test.csv");
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }),
                      "data.train: '" + d.file("none-*.csv") + "' matches no file"));
  write_text(d.file("empty.csv"), "x,label\n");
  o = csv_options(d, {"empty.csv"}, "test.csv");
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }), "empty.csv: holds no records"));
  write_text(d.file("a.csv"), "x,label\n1,0\n2,1\n");
  write_text(d.file("b.csv"), "x,z,label\n1,2,0\n");
  o = csv_options(d, {"a.csv", "b.csv"}, "test.csv");
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }),
                      "b.csv: examples of shape [2], but " + d.file("a.csv")));
  o = csv_options(d, {"a.csv"}, "b.csv");
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }),
                      "b.csv: 2 numeric columns, but the training set's examples have 1"));
  o = csv_options(d, {"a.csv"}, "test.csv");
  o.input_shape = {2, 2};
  BOOST_TEST(
    contains(error_of([&] { catalog_data(o, ""); }), "data.input-shape = [2, 2] holds 4 values"));
  o.input_shape = {1, 1, 1};
  BOOST_TEST((catalog_data(o, "").train->item_shape == shape_t{1, 1, 1}));
}

BOOST_AUTO_TEST_CASE(standardize_uses_the_training_statistics_everywhere) {
  temp_dir d;
  auto o = train_and_test_csv(d, "x,c,label\n1,5,0\n3,5,1\n", "x,c,label\n5,5,0\n");
  o.normalize = normalization::standardize;
  auto c = catalog_data(o, "");
  auto train = load_all(c.train);
  BOOST_TEST(train.images[0] == -1.0f); // mean 2, stddev 1
  BOOST_TEST(train.images[2] == 1.0f);
  BOOST_TEST(train.images[1] == 0.0f); // a constant feature is only centred
  BOOST_TEST(load_all(c.test).images[0] == 3.0f);
  auto json = describe_json(c);
  BOOST_TEST(contains(json, "\"kind\":\"standardize\",\"mean\":[2,5],\"stddev\":[1,1]"), json);
  o.mean = {0, 0};
  o.stddev = {2, 0};
  c = catalog_data(o, "");
  BOOST_TEST(load_all(c.test).images[0] == 2.5f);
  o.normalize = normalization::scale;
  o.mean.clear();
  o.stddev.clear();
  o.scale = 0.5;
  BOOST_TEST(load_all(catalog_data(o, "").test).images[0] == 2.5f);
}

BOOST_AUTO_TEST_CASE(option_problems_name_their_keys) {
  data_options o;
  o.train = {"x.csv"};
  o.shuffle_buffer = -1;
  o.prefetch = -1;
  o.classes = 1;
  o.format = "parquet";
  o.scale = 2;
  auto problems = data_option_problems(o);
  std::string all;
  for (auto& p : problems)
    all += p + "\n";
  BOOST_TEST(contains(all, "data.test is missing"));
  BOOST_TEST(contains(all, "data.shuffle-buffer = -1"));
  BOOST_TEST(contains(all, "data.prefetch = -1"));
  BOOST_TEST(contains(all, "data.classes = 1"));
  BOOST_TEST(contains(all, "data.format = 'parquet' is not one of idx, csv, npy"));
  BOOST_TEST(contains(all, "data.scale is set, but data.normalize is not 'scale'"));
}

BOOST_AUTO_TEST_CASE(regression_targets_are_real_numbers_checked_like_features) {
  temp_dir d;
  auto o = train_and_test_csv(d, "x,y\n1,0.5\n2,-1.25e1\n3,oops\n4,inf\n", "x,y\n5,7\n");
  o.csv.label_column = "y";
  o.task = objective::regression;
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "train.csv line 4: target 'oops' is not a finite number"), msg);
  o.bad_records = bad_record_policy::skip;
  auto c = catalog_data(o, "");
  BOOST_TEST(c.train->classes == 1);
  BOOST_TEST(c.train->files[0].bad == 2u);
  auto train = load_all(c.train);
  BOOST_TEST((train.targets == std::vector<float>{0.5f, -12.5f}));
  BOOST_TEST(load_all(c.test).targets[0] == 7.0f);
  BOOST_TEST(contains(describe_json(c), "\"task\":\"regression\""));
  o.classes = 3;
  BOOST_TEST(contains(error_of([&] { catalog_data(o, ""); }), "data.classes do not apply"));
  data_options idx;
  idx.train = {d.file("a.idx")};
  idx.train_labels = {d.file("b.idx")};
  idx.test = idx.train;
  idx.test_labels = idx.train_labels;
  idx.task = objective::regression;
  BOOST_TEST(contains(error_of([&] { catalog_data(idx, ""); }),
                      "data.task = regression reads its target from a CSV column"));
}

BOOST_AUTO_TEST_SUITE_END()
