// The sparse update rules against TF 1.x's kernels worked out by hand, with
// duplicate ids summed first as TF's _apply_sparse_duplicate_indices does.
#include <cmath>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "tensor/sparse/lookup_batch.hpp"
#include "tensor/sparse/sparse_optimizer.hpp"

using namespace troupe;

namespace {

sparse_optimizer_config rule(sparse_optimizer_kind kind, double lr) {
  sparse_optimizer_config c;
  c.kind = kind;
  c.learning_rate = lr;
  return c;
}

// Value 1 and fresh slots, one update with gradient g.
std::vector<float> one_update(const sparse_optimizer_config& c, float g, int64_t step = 0) {
  std::vector<float> row(1 + slot_count(c.kind));
  row[0] = 1.0f;
  for (uint32_t s = 0; s < slot_count(c.kind); ++s)
    row[1 + s] = slot_initial_value(c, s);
  apply_sparse_row(c, row.data(), row.data() + 1, &g, 1, step);
  return row;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sparse_optimizers)

BOOST_AUTO_TEST_CASE(duplicate_ids_are_summed_before_a_nonlinear_update) {
  // ids {7, 3, 7} with gradients 0.2, 9, 0.3: key 7 is updated once with 0.5.
  int64_t ids[] = {7, 3, 7};
  unique_keys unique;
  unique.assign(ids, 3);
  BOOST_TEST(unique.keys() == (std::vector<int64_t>{7, 3}));
  BOOST_TEST(unique.counts() == (std::vector<uint32_t>{2, 1}));
  bag_layout bags{{0, 1, 2, 3}, {}};
  float grads[] = {0.2f, 9.0f, 0.3f};
  std::vector<float> summed(2);
  combine_rows_backward(combiner::sum, bags, unique.inverse(), grads, 1, 2, summed.data());
  BOOST_TEST(summed[0] == 0.5f, boost::test_tools::tolerance(1e-6f));
  auto adagrad = rule(sparse_optimizer_kind::adagrad, 0.1);
  // acc = 0.1 + 0.25; w = 1 - 0.1 * 0.5 / sqrt(0.35)
  auto row = one_update(adagrad, summed[0]);
  BOOST_TEST(row[1] == 0.35f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(row[0] == 0.9154845745f, boost::test_tools::tolerance(1e-6f));
  // Two separate updates would have given 0.883994.
}

BOOST_AUTO_TEST_CASE(sgd) {
  BOOST_TEST(one_update(rule(sparse_optimizer_kind::sgd, 0.1), 0.5f)[0] == 0.95f);
  BOOST_TEST(slot_count(sparse_optimizer_kind::sgd) == 0u);
}

BOOST_AUTO_TEST_CASE(ftrl_follows_tfs_kernel) {
  auto c = rule(sparse_optimizer_kind::ftrl, 0.1);
  c.l1 = 0.01;
  c.l2 = 0.02;
  // acc' = 0.35; lin = 0.5 - (sqrt(.35) - sqrt(.1)) / 0.1 * 1;
  // quad = sqrt(.35) / 0.1 + 0.04; w = (sgn(lin) l1 - lin) / quad.
  auto row = one_update(c, 0.5f);
  BOOST_TEST(row[0] == 0.3767246586f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(row[1] == 0.35f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(row[2] == -2.2538021229f, boost::test_tools::tolerance(1e-5f));
  c.lr_power = -1.0;
  BOOST_TEST(one_update(c, 0.5f)[0] == 0.5621468927f, boost::test_tools::tolerance(1e-5f));
  // |lin| <= l1 sets the weight to 0 exactly.
  c.lr_power = -0.5;
  c.l1 = 10;
  BOOST_TEST(one_update(c, 0.5f)[0] == 0.0f);
  BOOST_TEST(sparse_slot_names(sparse_optimizer_kind::ftrl)
             == (std::vector<std::string>{"Ftrl", "Ftrl_1"}));
}

BOOST_AUTO_TEST_CASE(lazy_adam_updates_touched_rows_with_the_global_beta_powers) {
  auto c = rule(sparse_optimizer_kind::lazy_adam, 0.01);
  // t = 1: lr_t = 0.01 sqrt(1 - 0.999) / (1 - 0.9); m = 0.05, v = 0.00025.
  auto row = one_update(c, 0.5f);
  double lr_t = 0.01 * std::sqrt(1 - 0.999) / (1 - 0.9);
  double want = 1 - lr_t * 0.05 / (std::sqrt(0.00025) + 1e-8);
  BOOST_TEST(row[0] == want, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(row[1] == 0.05f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(row[2] == 0.00025f, boost::test_tools::tolerance(1e-6f));
  // At table step 9 (t = 10) a row touched for the first time: its moments
  // start from 0 (no decay while untouched, unlike TF1's Adam), the bias
  // correction is t = 10's.
  auto late = one_update(c, 0.5f, 9);
  double lr_10 = 0.01 * std::sqrt(1 - std::pow(0.999, 10)) / (1 - std::pow(0.9, 10));
  BOOST_TEST(late[0] == 1 - lr_10 * 0.05 / (std::sqrt(0.00025) + 1e-8),
             boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(bad_configurations_name_the_key) {
  auto c = rule(sparse_optimizer_kind::adagrad, 0);
  BOOST_TEST(c.check()->message.find("learning-rate") != std::string::npos);
  c = rule(sparse_optimizer_kind::ftrl, 0.1);
  c.lr_power = 0.5;
  BOOST_TEST(c.check()->message.find("embedding.lr-power") != std::string::npos);
  c = rule(sparse_optimizer_kind::lazy_adam, 0.1);
  c.beta1 = 1;
  BOOST_TEST(c.check()->message.find("embedding.beta1") != std::string::npos);
  BOOST_TEST(!rule(sparse_optimizer_kind::sgd, 0.1).check());
}

BOOST_AUTO_TEST_SUITE_END()
