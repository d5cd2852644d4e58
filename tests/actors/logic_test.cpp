// The plain classes behind the actors, tested without an actor system.
#define BOOST_TEST_MODULE actor_logic
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "actors/placement.hpp"
#include "actors/step_budget.hpp"
#include "actors/variable_store.hpp"

using namespace troupe;

namespace {

variable_store initialized_store() {
  variable_store store("ps:0", plain_sgd(0.5));
  auto err = store.initialize({"w", "b"}, {tensor({2, 2}, 1.0f), tensor({2}, 0.0f)});
  BOOST_REQUIRE(!err);
  return store;
}

} // namespace

BOOST_AUTO_TEST_CASE(store_applies_sgd) {
  auto store = initialized_store();
  auto err = store.apply_gradients({"w"}, {tensor({2, 2}, 2.0f)});
  BOOST_REQUIRE(!err);
  std::vector<tensor> out;
  BOOST_REQUIRE(!store.read({"w", "b"}, out));
  BOOST_TEST(out[0][0] == 0.0f); // 1 - 0.5 * 2
  BOOST_TEST(out[1][0] == 0.0f);
  BOOST_TEST(store.version() == 1);
}

BOOST_AUTO_TEST_CASE(store_refuses_bad_requests_and_stays_unchanged) {
  auto store = initialized_store();
  std::vector<tensor> before;
  BOOST_REQUIRE(!store.read({"w", "b"}, before));
  // A good gradient for w and a bad one for b: nothing may be applied.
  auto nan_grad = tensor({2}, 0.0f);
  nan_grad[1] = std::nanf("");
  auto err = store.apply_gradients({"w", "b"}, {tensor({2, 2}, 1.0f), nan_grad});
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::non_finite_gradient));
  BOOST_TEST(err->message.find("'b'") != std::string::npos);
  err = store.apply_gradients({"w"}, {tensor({4}, 1.0f)});
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::shape_mismatch));
  BOOST_TEST(err->message.find("[4]") != std::string::npos);
  err = store.apply_gradients({"w", "x"}, {tensor({2, 2}), tensor({1})});
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::unknown_variable));
  BOOST_TEST(err->message.find("'x'") != std::string::npos);
  auto inf_grad = tensor({2, 2}, 0.0f);
  inf_grad[0] = INFINITY;
  BOOST_TEST(store.apply_gradients({"w"}, {inf_grad}).has_value());
  BOOST_TEST(store.apply_gradients({"w"}, {}).has_value());
  std::vector<tensor> after;
  BOOST_REQUIRE(!store.read({"w", "b"}, after));
  BOOST_TEST(after[0].bit_equal(before[0]));
  BOOST_TEST(after[1].bit_equal(before[1]));
  BOOST_TEST(store.version() == 0);
}

BOOST_AUTO_TEST_CASE(store_initialises_exactly_once) {
  variable_store store("ps:1", plain_sgd(0.1));
  std::vector<tensor> out;
  auto err = store.read({"w"}, out);
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::not_initialized));
  BOOST_REQUIRE(!store.initialize({"w"}, {tensor({1}, 3.0f)}));
  err = store.initialize({"w"}, {tensor({1}, 4.0f)});
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::already_initialized));
  BOOST_REQUIRE(!store.read({"w"}, out));
  BOOST_TEST(out[0][0] == 3.0f);
}

BOOST_AUTO_TEST_CASE(round_robin_follows_creation_order) {
  std::vector<variable_spec> vars;
  for (int i = 0; i < 5; ++i)
    vars.push_back({"v" + std::to_string(i), {int64_t(1) << (10 - i)}, {}});
  auto shards = [&](int32_t n) {
    std::vector<int32_t> out;
    for (auto& p : plan_placement("round_robin", vars, n))
      out.push_back(p.shard);
    return out;
  };
  BOOST_TEST(shards(2) == (std::vector<int32_t>{0, 1, 0, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(shards(3) == (std::vector<int32_t>{0, 1, 2, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(shards(1) == (std::vector<int32_t>(5, 0)), boost::test_tools::per_element());
  BOOST_CHECK_THROW(plan_placement("round_robin", vars, 0), std::exception);
  BOOST_CHECK_THROW(plan_placement("by_size", vars, 2), std::exception);
}

BOOST_AUTO_TEST_CASE(step_budget_grants_exactly_last_step_updates) {
  step_budget budget(3);
  BOOST_TEST(*budget.grant(0) == 0);
  BOOST_TEST(*budget.grant(0) == 0); // asking again returns the same grant
  BOOST_TEST(*budget.grant(1) == 1);
  BOOST_TEST(*budget.grant(2) == 2);
  BOOST_TEST(!budget.grant(3).has_value()); // every step is granted
  budget.revoke(1);                          // worker 1 lost: its step goes back
  BOOST_TEST(*budget.grant(3) == 1);
  budget.complete(0);
  budget.complete(2);
  budget.complete(0); // no grant held: no effect
  BOOST_TEST(budget.global_step() == 2);
  BOOST_TEST(!budget.finished());
  budget.complete(3);
  BOOST_TEST(budget.global_step() == 3);
  BOOST_TEST(budget.finished());
  BOOST_TEST(budget.outstanding() == 0u);
}
