// The state of one ps shard (variables, optimizer, checks), without CAF.
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "actors/ps/variable_store.hpp"

using namespace troupe;

namespace {

variable_store initialized_store() {
  variable_store store("ps:0", plain_sgd(0.5));
  auto err = store.initialize({"w", "b"}, {tensor({2, 2}, 1.0f), tensor({2}, 0.0f)});
  BOOST_REQUIRE(!err);
  return store;
}

// The named values, copied out of the store.
maybe_failure read(const variable_store& store, const std::vector<std::string>& names,
                   std::vector<tensor>& out) {
  std::vector<std::shared_ptr<const tensor>> shared;
  auto err = store.share(names, shared);
  out.clear();
  for (auto& value : shared)
    out.push_back(*value);
  return err;
}

} // namespace

BOOST_AUTO_TEST_SUITE(variable_store_tests)

BOOST_AUTO_TEST_CASE(store_applies_sgd) {
  auto store = initialized_store();
  auto err = store.apply_gradients({"w"}, {tensor({2, 2}, 2.0f)});
  BOOST_REQUIRE(!err);
  std::vector<tensor> out;
  BOOST_REQUIRE(!read(store, {"w", "b"}, out));
  BOOST_TEST(out[0][0] == 0.0f); // 1 - 0.5 * 2
  BOOST_TEST(out[1][0] == 0.0f);
  BOOST_TEST(store.version() == 1);
}

BOOST_AUTO_TEST_CASE(shared_values_stay_as_they_were_while_held) {
  auto store = initialized_store();
  std::vector<std::shared_ptr<const tensor>> held;
  BOOST_REQUIRE(!store.share({"w"}, held));
  const float* storage = held[0]->data();
  // Updated while a pull holds it: the update goes to a copy.
  BOOST_REQUIRE(!store.apply_gradients({"w"}, {tensor({2, 2}, 2.0f)}));
  BOOST_TEST((*held[0])[0] == 1.0f);
  std::vector<std::shared_ptr<const tensor>> now;
  BOOST_REQUIRE(!store.share({"w"}, now));
  BOOST_TEST((*now[0])[0] == 0.0f);
  BOOST_TEST(now[0]->data() != storage);
  // Released: the next update is in place, no copy.
  held.clear();
  storage = now[0]->data();
  now.clear();
  BOOST_REQUIRE(!store.apply_gradients({"w"}, {tensor({2, 2}, 2.0f)}));
  BOOST_REQUIRE(!store.share({"w"}, now));
  BOOST_TEST(now[0]->data() == storage);
  BOOST_TEST((*now[0])[0] == -1.0f);
  BOOST_TEST(store.share({"nope"}, now).has_value());
}

BOOST_AUTO_TEST_CASE(store_refuses_bad_requests_and_stays_unchanged) {
  auto store = initialized_store();
  std::vector<tensor> before;
  BOOST_REQUIRE(!read(store, {"w", "b"}, before));
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
  BOOST_REQUIRE(!read(store, {"w", "b"}, after));
  BOOST_TEST(after[0].bit_equal(before[0]));
  BOOST_TEST(after[1].bit_equal(before[1]));
  BOOST_TEST(store.version() == 0);
}

BOOST_AUTO_TEST_CASE(store_initialises_exactly_once) {
  variable_store store("ps:1", plain_sgd(0.1));
  std::vector<tensor> out;
  auto err = read(store, {"w"}, out);
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::not_initialized));
  BOOST_REQUIRE(!store.initialize({"w"}, {tensor({1}, 3.0f)}));
  err = store.initialize({"w"}, {tensor({1}, 4.0f)});
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::already_initialized));
  BOOST_REQUIRE(!read(store, {"w"}, out));
  BOOST_TEST(out[0][0] == 3.0f);
}

BOOST_AUTO_TEST_SUITE_END()
