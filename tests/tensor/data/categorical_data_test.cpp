// Categorical data for embedding models (tensor/data/key_layout.hpp): CSV
// categorical columns, Criteo and libsvm files through the catalog and the
// stream, keys packed into example rows and read back exactly.
#include <cmath>
#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "tensor/data/catalog.hpp"
#include "tensor/data/stream.hpp"
#include "tensor/sparse/keys.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

std::string criteo_line(int label, int first_integer, const std::string& first_category) {
  std::string line = std::to_string(label) + "\t" + std::to_string(first_integer);
  for (int i = 2; i <= 13; ++i)
    line += "\t";
  line += "\t" + first_category;
  for (int c = 2; c <= 26; ++c)
    line += c == 3 ? "\t" : "\tabc" + std::to_string(c);
  return line + "\n";
}

} // namespace

BOOST_AUTO_TEST_SUITE(categorical_data)

BOOST_AUTO_TEST_CASE(packed_keys_read_back_exactly) {
  float slot[4];
  for (int64_t key : {int64_t{0}, int64_t{1}, int64_t{(1ll << 48) - 1}, field_key(8190, "68fd1e64"),
                      (int64_t{1} << 62) + 12345}) {
    pack_key(key, 0.5f, slot);
    BOOST_TEST(unpack_key(slot) == key);
    BOOST_TEST(slot[3] == 0.5f);
    for (float v : slot)
      BOOST_TEST(std::isfinite(v));
  }
  pack_key(key_layout::no_key, 1.0f, slot);
  BOOST_TEST(unpack_key(slot) == key_layout::no_key);
}

BOOST_AUTO_TEST_CASE(csv_categorical_columns_become_field_keys_after_the_dense_values) {
  temp_dir d;
  write_text(d.file("train.csv"), "userId,movieId,rating,age\n"
                                  "7,31,2.5,30\n"
                                  "7,abc,4,40\n"
                                  "9,31,5,50\n");
  write_text(d.file("test.csv"), "userId,movieId,rating,age\n8,31,3,20\n");
  data_options o;
  o.train = {d.file("train.csv")};
  o.test = {d.file("test.csv")};
  o.csv.label_column = "rating";
  o.csv.categorical_columns = {"userId", "movieId"};
  o.task = objective::regression;
  o.normalize = normalization::none;
  auto catalog = catalog_data(o, "");
  auto& train = *catalog.train;
  BOOST_TEST(train.keys.dense == 1);
  BOOST_TEST(train.keys.fields == 2);
  BOOST_TEST(train.keys.keys_per_field == 1);
  BOOST_TEST(train.features() == 1 + 2 * 4);
  BOOST_TEST((catalog.test->keys == train.keys));
  auto all = load_all(catalog.train);
  BOOST_REQUIRE(all.size() == 3);
  const float* row = all.images.data() + all.images.dim(1); // the second example
  BOOST_TEST(row[0] == 40.0f);
  BOOST_TEST(unpack_key(row + 1) == field_key(0, "7"));
  BOOST_TEST(unpack_key(row + 5) == field_key(1, "abc"));
  BOOST_TEST(all.targets[1] == 4.0f);
  BOOST_TEST(describe_json(catalog).find("\"keys\":{\"dense\":1,\"fields\":2")
             != std::string::npos);

  // A categorical column that is also the label is refused by name.
  o.csv.categorical_columns = {"rating"};
  BOOST_CHECK_EXCEPTION(catalog_data(o, ""), data_error, [](const data_error& e) {
    return std::string(e.what()).find("data.categorical-columns") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(criteo_files_stream_log_dense_values_keys_and_binary_labels) {
  temp_dir d;
  std::string train;
  for (int i = 0; i < 10; ++i)
    train += criteo_line(i % 2, i == 3 ? -7 : i, i == 4 ? "" : "68fd1e6" + std::to_string(i));
  write_text(d.file("train.tsv"), train);
  write_text(d.file("test.tsv"), criteo_line(1, 5, "x"));
  data_options o;
  o.train = {d.file("train.tsv")};
  o.test = {d.file("test.tsv")};
  auto catalog = catalog_data(o, "");
  auto& split = *catalog.train;
  BOOST_TEST(name_of(split.format) == "criteo");
  BOOST_TEST(split.classes == 2);
  BOOST_TEST(split.keys.dense == 26); // 13 values, 13 empty-field indicators
  BOOST_TEST(split.keys.fields == 26);
  stream_options so;
  so.shuffle = false;
  so.batch_size = 10;
  share_reader reader(catalog.train, so);
  batch b;
  reader.next_batch(b);
  auto width = static_cast<size_t>(split.features());
  for (size_t e = 0; e < 10; ++e) {
    const float* row = b.images.data() + e * width;
    BOOST_TEST(b.labels[e] == static_cast<int32_t>(e % 2));
    double x = e == 3 ? -7.0 : double(e);
    BOOST_TEST(row[0] == static_cast<float>(std::copysign(std::log1p(std::fabs(x)), x)));
    BOOST_TEST(row[1] == 0.0f);  // an empty integer field
    BOOST_TEST(row[13] == 0.0f); // I1 is written: its indicator is 0
    BOOST_TEST(row[14] == 1.0f); // I2 is empty
    int64_t first = unpack_key(row + 26);
    BOOST_TEST(first
               == (e == 4 ? key_layout::no_key : field_key(0, "68fd1e6" + std::to_string(e))));
    BOOST_TEST(unpack_key(row + 26 + 2 * 4) == key_layout::no_key); // C3 is empty
    BOOST_TEST(unpack_key(row + 26 + 25 * 4) == field_key(25, "abc26"));
  }
}

BOOST_AUTO_TEST_CASE(libsvm_lines_hold_weighted_keys_up_to_max_keys) {
  temp_dir d;
  write_text(d.file("train.svm"), "+1 3:0.5 10:2\n-1 4:1\n+1 3:1 4:1 5:1\n");
  write_text(d.file("test.svm"), "-1 7:1\n");
  data_options o;
  o.train = {d.file("train.svm")};
  o.test = {d.file("test.svm")};
  o.csv.max_keys = 3;
  auto catalog = catalog_data(o, "");
  BOOST_TEST(catalog.train->keys.fields == 1);
  BOOST_TEST(catalog.train->keys.keys_per_field == 3);
  auto all = load_all(catalog.train);
  BOOST_TEST(all.labels[0] == 1);
  BOOST_TEST(all.labels[1] == 0); // -1 is class 0
  const float* first = all.images.data();
  BOOST_TEST(unpack_key(first) == 3);
  BOOST_TEST(first[3] == 0.5f);
  BOOST_TEST(unpack_key(first + 4) == 10);
  BOOST_TEST(unpack_key(first + 8) == key_layout::no_key);

  // A line with more keys than data.max-keys is a bad record naming the key.
  o.csv.max_keys = 2;
  BOOST_CHECK_EXCEPTION(catalog_data(o, ""), data_error, [](const data_error& e) {
    return std::string(e.what()).find("data.max-keys") != std::string::npos;
  });
  o.csv.max_keys = 0;
  BOOST_TEST(data_option_problems(o).size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
