#include <cmath>

#include <boost/test/unit_test.hpp>

#include "tensor/data/dataset.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

BOOST_AUTO_TEST_SUITE(datasets)

// The library API's in-memory sets are checked like files are.
BOOST_AUTO_TEST_CASE(labels_and_features_are_checked_before_training) {
  dataset data;
  data.images = tensor({5, 6});
  data.labels = {0, 1, 2, 3, 200};
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

BOOST_AUTO_TEST_CASE(copy_batch_takes_rows_and_stops_at_the_end) {
  dataset data;
  data.images = tensor({3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  data.labels = {7, 8, 9};
  batch b;
  copy_batch(data, 1, 5, b);
  BOOST_TEST(b.size() == 2u);
  BOOST_TEST(b.images[0] == 3.0f);
  BOOST_TEST(b.labels[1] == 9);
}

BOOST_AUTO_TEST_SUITE_END()
