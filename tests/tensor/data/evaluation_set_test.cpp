#include <boost/test/unit_test.hpp>

#include "tensor/data/evaluation_set.hpp"
#include "tensor/nn/model.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// A regression set in two test files, the first with a bad record that
// data.bad-records = skip passes over: 7 usable examples of 2 features.
data_options two_test_files(const temp_dir& d) {
  write_text(d.file("train.csv"), "a,b,y\n1,2,0.5\n3,4,1.5\n");
  write_text(d.file("test1.csv"), "a,b,y\n1,1,1\n2,2,oops\n3,3,3\n4,4,4\n");
  write_text(d.file("test2.csv"), "a,b,y\n5,5,5\n6,6,6\n7,7,7\n8,8,8\n");
  data_options o;
  o.train = {d.file("train.csv")};
  o.test = {d.file("test1.csv"), d.file("test2.csv")};
  o.csv.label_column = "y";
  o.task = objective::regression;
  o.bad_records = bad_record_policy::skip;
  o.normalize = normalization::none;
  return o;
}

// Every batch of `set` in order, `count` examples a batch, end to end.
dataset read_whole(const evaluation_set& set, size_t count) {
  dataset out;
  std::vector<float> images;
  batch b;
  for (auto examples = set.read(count); examples.next(b);) {
    BOOST_TEST(b.size() <= count);
    images.insert(images.end(), b.images.data(), b.images.data() + b.images.size());
    out.labels.insert(out.labels.end(), b.labels.begin(), b.labels.end());
    out.targets.insert(out.targets.end(), b.targets.begin(), b.targets.end());
  }
  BOOST_TEST(b.size() == 0u); // the last call hands out nothing
  out.images = tensor({static_cast<int64_t>(out.labels.size()), 2}, images);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(evaluation_sets)

// A set read from its files at each evaluation gives the batches a set held
// in memory gives, across the files' boundary and past the bad record.
BOOST_AUTO_TEST_CASE(a_streamed_set_reads_what_a_held_one_holds) {
  temp_dir d;
  auto c = catalog_data(two_test_files(d), "");
  evaluation_set held(c.test, default_eval_memory_bytes);
  evaluation_set streamed(c.test, 0);
  BOOST_TEST(held.held());
  BOOST_TEST(!streamed.held());
  BOOST_TEST(held.size() == 7u);
  BOOST_TEST(streamed.size() == 7u);
  BOOST_TEST(streamed.regression());
  auto all = load_all(c.test);
  BOOST_TEST((all.targets == std::vector<float>{1, 3, 4, 5, 6, 7, 8}));
  for (size_t count : {1, 3, 7, 100}) {
    auto a = read_whole(held, count);
    auto b = read_whole(streamed, count);
    BOOST_TEST(a.images.bit_equal(all.images), "held, batches of " << count);
    BOOST_TEST(b.images.bit_equal(all.images), "streamed, batches of " << count);
    BOOST_TEST((b.targets == all.targets));
    BOOST_TEST((a.targets == all.targets));
    BOOST_TEST(b.labels.size() == 7u);
  }
  // Each reader starts over: a second evaluation reads the files again.
  BOOST_TEST(read_whole(streamed, 4).images.bit_equal(all.images));
  // The bound: 7 examples of 2 features and a target.
  BOOST_TEST(evaluation_set::bytes_of(*c.test) == 7u * (2 * 4 + 4 + 4));
  BOOST_TEST(evaluation_set(c.test, 7 * 16).held());
  BOOST_TEST(!evaluation_set(c.test, 7 * 16 - 1).held());
}

// A streamed set reads nothing until it is read; a file that lost records
// since the catalog counted them is an error naming the set, not a short
// evaluation.
BOOST_AUTO_TEST_CASE(a_streamed_set_reads_its_files_only_when_read_and_checks_the_count) {
  temp_dir d;
  auto c = catalog_data(two_test_files(d), "");
  write_text(d.file("test2.csv"), "a,b,y\n5,5,5\n");
  evaluation_set streamed(c.test, 0); // no read yet: no error
  BOOST_TEST(streamed.size() == 7u);
  auto msg = error_of([&] { read_whole(streamed, 2); });
  BOOST_TEST(contains(msg, "test set: 4 usable records read, but 7 counted"), msg);
  msg = error_of([&] { evaluation_set held(c.test, default_eval_memory_bytes); });
  BOOST_TEST(contains(msg, "4 usable records read, but 7 counted"), msg);
}

// A reader dropped after its first batch stops its read-ahead (its
// destructor would wait for ever otherwise) and leaves the set as it was.
BOOST_AUTO_TEST_CASE(a_reader_dropped_early_stops_reading_ahead) {
  temp_dir d;
  auto c = catalog_data(two_test_files(d), "");
  evaluation_set streamed(c.test, 0);
  {
    auto examples = streamed.read(1);
    batch b;
    BOOST_TEST(examples.next(b));
    BOOST_TEST(b.size() == 1u);
  }
  BOOST_TEST(read_whole(streamed, 7).images.bit_equal(load_all(c.test).images));
}

// A model scores the same on either kind of set, and on a set made in memory.
BOOST_AUTO_TEST_CASE(a_model_scores_the_same_on_a_held_and_a_streamed_set) {
  temp_dir d;
  auto c = catalog_data(two_test_files(d), "");
  auto net = make_softmax_model(2, 1, objective::regression);
  auto params = initial_values(*net, 3);
  auto on_held = evaluate_dataset(*net, params, evaluation_set(c.test, 1 << 20), 3);
  auto on_streamed = evaluate_dataset(*net, params, evaluation_set(c.test, 0), 3);
  auto in_memory = evaluate_dataset(
    *net, params, evaluation_set(std::make_shared<const dataset>(load_all(c.test))), 3);
  BOOST_TEST(on_held.examples == 7u);
  BOOST_TEST(on_streamed.examples == 7u);
  BOOST_TEST(on_held.loss > 0);
  BOOST_TEST(on_streamed.loss == on_held.loss);
  BOOST_TEST(in_memory.loss == on_held.loss);
}

BOOST_AUTO_TEST_CASE(the_memory_bound_is_checked_with_the_data_options) {
  data_options o;
  o.train = {"a.csv"};
  o.test = {"b.csv"};
  o.eval_memory_bytes = -1;
  auto problems = data_option_problems(o);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(contains(problems[0], "data.eval-memory-bytes = -1 is outside 0..1099511627776"),
             problems[0]);
}

BOOST_AUTO_TEST_SUITE_END()
