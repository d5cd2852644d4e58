// The state of one ps shard (variables, optimizer, checks), without CAF.
#include <atomic>
#include <cmath>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "actors/ps/variable_store.hpp"

using namespace troupe;

namespace {

// "w" [2, 2] of ones and "b" [2] of zeros, SGD at 0.5.
struct initialized_store : variable_store {
  initialized_store() : variable_store("ps:0", plain_sgd(0.5)) {
    auto err = initialize({"w", "b"}, {tensor({2, 2}, 1.0f), tensor({2}, 0.0f)});
    BOOST_REQUIRE(!err);
  }
};

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
  initialized_store store;
  auto err = store.apply_gradients({"w"}, {tensor({2, 2}, 2.0f)});
  BOOST_REQUIRE(!err);
  std::vector<tensor> out;
  BOOST_REQUIRE(!read(store, {"w", "b"}, out));
  BOOST_TEST(out[0][0] == 0.0f); // 1 - 0.5 * 2
  BOOST_TEST(out[1][0] == 0.0f);
  BOOST_TEST(store.version() == 1);
}

BOOST_AUTO_TEST_CASE(shared_values_stay_as_they_were_while_held) {
  initialized_store store;
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
  initialized_store store;
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

BOOST_AUTO_TEST_CASE(pins_are_for_the_run_and_reset_starts_over) {
  variable_store store("ps:2", plain_sgd(0.5));
  std::vector<std::shared_ptr<const tensor>> pinned;
  int64_t version = -1;
  auto err = store.pin(7, {"w"}, pinned, version);
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::not_initialized));
  BOOST_REQUIRE(!store.initialize({"w"}, {tensor({2}, 1.0f)}, 3, 7));
  err = store.pin(8, {"w"}, pinned, version);
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::unauthorized));
  BOOST_TEST(err->message.find("another run (8, not 7)") != std::string::npos, err->message);
  BOOST_REQUIRE(!store.pin(7, {"w"}, pinned, version));
  BOOST_TEST(version == 3);
  BOOST_TEST((*pinned[0])[1] == 1.0f);
  store.reset();
  BOOST_TEST(!store.initialized());
  BOOST_TEST((*pinned[0])[1] == 1.0f); // what a connection holds stays valid
  BOOST_REQUIRE(!store.initialize({"w"}, {tensor({2}, 5.0f)}, 0, 8));
  BOOST_REQUIRE(!store.pin(8, {"w"}, pinned, version));
  BOOST_TEST(version == 0);
  BOOST_TEST((*pinned[0])[0] == 5.0f);
}

// A reader thread pins while the shard applies updates: every pinned value
// is one whole version (all its elements equal), never half of one update.
BOOST_AUTO_TEST_CASE(a_pin_from_another_thread_sees_whole_versions_only) {
  variable_store store("ps:3", plain_sgd(1.0));
  BOOST_REQUIRE(!store.initialize({"w"}, {tensor({1 << 16}, 0.0f)}, 0, 1));
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, pins{0};
  std::thread reader([&] {
    std::vector<std::shared_ptr<const tensor>> pinned;
    int64_t version = 0;
    while (!done) {
      if (store.pin(1, {"w"}, pinned, version))
        continue;
      auto& w = *pinned[0];
      // version v holds -v everywhere (each update subtracts a gradient of ones)
      for (size_t i = 0; i < w.size(); i += 997)
        if (w[i] != -static_cast<float>(version))
          ++torn;
      ++pins;
    }
  });
  tensor ones({1 << 16}, 1.0f);
  for (int step = 0; step < 2000; ++step)
    BOOST_REQUIRE(!store.apply_gradients({"w"}, {ones}));
  done = true;
  reader.join();
  BOOST_TEST(torn == 0);
  BOOST_TEST(pins > 0);
}

BOOST_AUTO_TEST_SUITE_END()
