// Empty numeric CSV cells (data.missing-values, data.missing-fill) and the
// defaults a CSV set trains with.
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "tensor/data/catalog.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// train.csv and test.csv in d, as [data] names them, left unnormalised.
data_options raw_csv(const temp_dir& d, const std::string& train, const std::string& test) {
  write_text(d.file("train.csv"), train);
  write_text(d.file("test.csv"), test);
  data_options o;
  o.train = {d.file("train.csv")};
  o.test = {d.file("test.csv")};
  o.normalize = normalization::none;
  return o;
}

// Examples [first, last) of a loaded set, their values in a row.
std::vector<float> examples(const dataset& set, size_t first, size_t last) {
  auto width = set.images.size() / set.size();
  return {set.images.data() + first * width, set.images.data() + last * width};
}

const char* train_with_gaps = "x,y,label\n1,2,0\n3,,1\n5,8,0\n7,,1\n9,4,1\n";

} // namespace

BOOST_AUTO_TEST_SUITE(empty_cells)

BOOST_AUTO_TEST_CASE(an_empty_cell_reads_the_training_mean_and_an_indicator_marks_it) {
  temp_dir d;
  auto o = raw_csv(d, train_with_gaps, "x,y,label\n,,1\n2,4,0\n");
  auto c = catalog_data(o, "");
  // x, y, then y's indicator: only y has empty cells in training.
  BOOST_TEST((c.train->item_shape == shape_t{3}));
  auto train = load_all(c.train);
  BOOST_REQUIRE(train.size() == 5u);
  BOOST_TEST((examples(train, 1, 2)
              == std::vector<float>{3, 14.0f / 3, 1})); // y's mean over 2, 8 and 4 is 14/3
  BOOST_TEST((examples(train, 0, 1) == std::vector<float>{1, 2, 0}));
  // The test set's empty x reads x's training mean (5), without an
  // indicator: x had no empty cell to learn one from.
  auto test = load_all(c.test);
  BOOST_TEST((examples(test, 0, 1) == std::vector<float>{5, 14.0f / 3, 1}));
  auto json = describe_json(c);
  BOOST_TEST(contains(json, "{\"column\":\"y\",\"fill\":4.66666651,\"indicator\":true}"), json);
  BOOST_TEST(contains(json, "{\"column\":\"x\",\"fill\":5,\"indicator\":false}"), json);
  BOOST_TEST(!contains(data_summary_json(c), "\"column\":\"x\""));
}

BOOST_AUTO_TEST_CASE(zero_and_a_column_of_its_own_fill_as_asked) {
  temp_dir d;
  auto o = raw_csv(d, train_with_gaps, "x,y,label\n1,,0\n");
  o.csv.missing = missing_values::zero;
  auto test = load_all(catalog_data(o, "").test);
  BOOST_TEST((examples(test, 0, 1) == std::vector<float>{1, 0, 1}));
  o.csv.missing = missing_values::refuse;
  o.csv.missing_fill = {{"y", -1.5f}};
  test = load_all(catalog_data(o, "").test);
  BOOST_TEST((examples(test, 0, 1) == std::vector<float>{1, -1.5f, 1}));
}

BOOST_AUTO_TEST_CASE(refuse_names_the_settings_that_would_fill_the_cell) {
  temp_dir d;
  auto o = raw_csv(d, train_with_gaps, "x,y,label\n1,2,0\n");
  o.csv.missing = missing_values::refuse;
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "train.csv line 3, column 'y' (1) is empty"), msg);
  BOOST_TEST(contains(msg, "data.missing-values = \"refuse\""), msg);
  BOOST_TEST(contains(msg, "data.missing-fill = [\"y=0\"]"), msg);
  BOOST_TEST(contains(msg, "data.bad-records = skip"), msg);
  o.bad_records = bad_record_policy::skip;
  auto c = catalog_data(o, "");
  BOOST_TEST(c.train->usable_records() == 3u);
  BOOST_TEST((c.train->item_shape == shape_t{2})); // nothing filled: no indicator
}

BOOST_AUTO_TEST_CASE(a_fill_for_a_column_that_is_not_numeric_is_refused) {
  temp_dir d;
  auto o = raw_csv(d, "x,city,label\n1,Paris,0\n,Rome,1\n", "x,city,label\n1,Oslo,0\n");
  o.csv.categorical_columns = {"city"};
  o.csv.missing_fill = {{"city", 0}};
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "data.missing-fill names column 'city', which is not a numeric "
                           "column of the training set (numeric: x)"),
             msg);
  BOOST_TEST(!parse_column_fill("y").has_value());
  BOOST_TEST(!parse_column_fill("y=").has_value());
  BOOST_TEST(!parse_column_fill("y=nan").has_value());
  BOOST_TEST(parse_column_fill("a=b=+2.5")->column == "a=b");
  BOOST_TEST(parse_column_fill("a=b=+2.5")->value == 2.5f);
}

BOOST_AUTO_TEST_CASE(indicators_come_before_the_keys_of_categorical_columns) {
  temp_dir d;
  auto o = raw_csv(d, "x,city,label\n1,Paris,0\n,Rome,1\n", "x,city,label\n,Oslo,0\n");
  o.csv.categorical_columns = {"city"};
  auto c = catalog_data(o, "");
  BOOST_TEST(c.train->keys.dense == 2); // x and its indicator
  BOOST_TEST(c.train->keys.fields == 1);
  auto test = load_all(c.test);
  BOOST_TEST(test.images[0] == 1.0f); // x's mean
  BOOST_TEST(test.images[1] == 1.0f); // the indicator
}

BOOST_AUTO_TEST_CASE(a_text_in_a_numeric_column_names_categorical_columns) {
  temp_dir d;
  auto o = raw_csv(d, "x,plan,label\n1,Gold,0\n2,Basic,1\n", "x,plan,label\n1,Gold,0\n");
  auto msg = error_of([&] { catalog_data(o, ""); });
  BOOST_TEST(contains(msg, "'Gold' is not a number"), msg);
  BOOST_TEST(contains(msg, "data.categorical-columns"), msg);
}

BOOST_AUTO_TEST_CASE(csv_numbers_are_standardized_by_default_and_bytes_scaled) {
  temp_dir d;
  auto o = raw_csv(d, "small,large,label\n0,1000,0\n1,3000,1\n", "small,large,label\n1,1000,0\n");
  o.normalize = normalization::automatic;
  auto c = catalog_data(o, "");
  BOOST_TEST((c.train->norm.kind == normalization::standardize));
  auto train = load_all(c.train);
  BOOST_TEST((examples(train, 0, 2) == std::vector<float>{-1, -1, 1, 1}));
  BOOST_TEST(contains(describe_lines(c).front(), "normalisation standardize (2 features)"));
}

BOOST_AUTO_TEST_SUITE_END()
