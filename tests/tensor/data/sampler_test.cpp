// How a worker picks its data: every example read by exactly one worker per
// epoch, reshuffled each epoch.
#include <set>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/data/sampler.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(samplers)

BOOST_AUTO_TEST_CASE(worker_shares_are_disjoint_and_reshuffled) {
  dataset data;
  data.images = tensor({10, 1});
  for (int i = 0; i < 10; ++i) {
    data.images[i] = float(i);
    data.labels.push_back(i);
  }
  std::set<int32_t> seen;
  for (size_t w = 0; w < 3; ++w) {
    example_sampler sampler(10, w, 3, 42);
    batch b;
    sampler.next_batch(data, sampler.share_size(), b);
    for (size_t k = 0; k < b.size(); ++k) {
      auto l = b.labels[k];
      BOOST_TEST(size_t(l) % 3 == w);      // only this worker's examples
      BOOST_TEST(seen.insert(l).second);   // no example on two workers
      BOOST_TEST(b.images[k] == float(l)); // the image travels with its label
    }
    BOOST_TEST(sampler.epoch() == 0u);
    sampler.next_batch(data, 1, b);
    BOOST_TEST(sampler.epoch() == 1u);
  }
  BOOST_TEST(seen.size() == 10u);
  // Same seed, same order; another epoch, another order (over a larger shard).
  example_sampler a(1000, 0, 1, 5), b(1000, 0, 1, 5);
  dataset big;
  big.images = tensor({1000, 1});
  big.labels.resize(1000);
  for (int i = 0; i < 1000; ++i)
    big.labels[i] = i;
  batch ba, bb;
  a.next_batch(big, 1000, ba);
  b.next_batch(big, 1000, bb);
  BOOST_TEST(ba.labels == bb.labels);
  a.next_batch(big, 1000, bb);
  BOOST_TEST(ba.labels != bb.labels);
  BOOST_CHECK_THROW(example_sampler(10, 3, 3, 1), troupe_error);
}

// A restored worker continues its data where the checkpoint left it: the
// same examples in the same order as if it had never stopped.
BOOST_AUTO_TEST_CASE(seeking_continues_the_same_sequence) {
  dataset data;
  data.images = tensor({50, 1});
  for (int i = 0; i < 50; ++i) {
    data.images[i] = float(i);
    data.labels.push_back(i);
  }
  example_sampler original(50, 1, 2, 7);
  batch b;
  for (int step = 0; step < 13; ++step) // 13 x 4 = 52 examples: into the third epoch
    original.next_batch(data, 4, b);
  BOOST_TEST(original.epoch() == 2u);
  example_sampler restored(50, 1, 2, 7);
  restored.seek(original.epoch(), original.position());
  for (int step = 0; step < 10; ++step) {
    batch x, y;
    original.next_batch(data, 4, x);
    restored.next_batch(data, 4, y);
    BOOST_TEST(x.labels == y.labels);
  }
  BOOST_CHECK_THROW(restored.seek(0, 26), data_error); // the share holds 25
}

BOOST_AUTO_TEST_SUITE_END()
