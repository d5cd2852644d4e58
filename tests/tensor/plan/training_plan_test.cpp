// The training plan and slice_router: a plan is checked against the model
// before it is used, and values move between variables and slices exactly.
#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/plan/training_plan.hpp"

using namespace troupe;

namespace {

std::vector<variable_spec> model_vars() {
  return {{"w", {5, 3}, {}}, {"b", {3}, {}}, {"k", {2, 4}, {}}};
}

tensor counting(shape_t shape, float start) {
  tensor t(std::move(shape));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = start + static_cast<float>(i);
  return t;
}

std::string error_of(std::vector<planned_slice> plan, int32_t shards = 2) {
  try {
    slice_router router(std::move(plan), model_vars(), shards);
  } catch (const troupe_error& e) {
    return e.what();
  }
  return "no error";
}

// w split in rows 3 + 2 over both shards, b whole on ps:1, k split by columns on ps:0.
std::vector<planned_slice> good_plan() {
  return {{"w/part_0", 0, 0, 0, 0, 3},
          {"w/part_1", 1, 0, 0, 3, 2},
          {"b", 1, 1, 0, 0, 3},
          {"k/part_0", 0, 2, 1, 0, 1},
          {"k/part_1", 0, 2, 1, 1, 3}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(training_plans)

BOOST_AUTO_TEST_CASE(a_placement_becomes_a_plan) {
  auto vars = model_vars();
  auto placement = plan_placement(placement_strategy::round_robin, vars, 2, 0.05,
                                  parse_partition_rules({"w fixed_size shards=2"}));
  auto plan = build_plan(placement, vars);
  BOOST_REQUIRE(plan.size() == 4u);
  BOOST_TEST(plan[1].name == "w/part_1");
  BOOST_TEST(plan[1].variable == 0);
  BOOST_TEST(plan[1].offset == 3);
  BOOST_TEST(plan[1].extent == 2);
  BOOST_TEST(plan[2].name == "b");
  BOOST_TEST(plan[2].variable == 1);
  BOOST_TEST(plan[3].shard == 1); // round robin: slice 3 -> ps:1
  // The plan it makes is one the router accepts.
  BOOST_CHECK_NO_THROW(slice_router(plan, vars, 2));
  BOOST_CHECK_THROW(build_plan(placement, {{"other", {1}, {}}}), troupe_error);
}

BOOST_AUTO_TEST_CASE(slices_are_grouped_by_shard) {
  slice_router router(good_plan(), model_vars(), 3);
  BOOST_REQUIRE(router.parts().size() == 2u); // ps:2 holds nothing: no part, no request
  BOOST_TEST(router.parts()[0].shard == 0);
  BOOST_TEST(router.parts()[0].names
               == (std::vector<std::string>{"w/part_0", "k/part_0", "k/part_1"}),
             boost::test_tools::per_element());
  BOOST_TEST(router.parts()[1].names == (std::vector<std::string>{"w/part_1", "b"}),
             boost::test_tools::per_element());
  BOOST_TEST(router.slice(4).shape == (shape_t{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(plans_that_do_not_fit_the_model_are_refused) {
  auto plan = good_plan();
  plan[1].offset = 2; // rows 2..3 twice, row 4 never
  BOOST_TEST(error_of(plan).find("do not cover w exactly once") != std::string::npos);
  plan = good_plan();
  plan.pop_back(); // columns 1..3 of k missing
  BOOST_TEST(error_of(plan).find("do not cover k exactly once") != std::string::npos);
  plan = good_plan();
  plan[3].axis = 0; // k split along two axes
  BOOST_TEST(error_of(plan).find("k is split along two axes") != std::string::npos);
  plan = good_plan();
  plan[2].shard = 2;
  BOOST_TEST(error_of(plan).find("b is on ps:2, but there are 2 shards") != std::string::npos);
  plan = good_plan();
  plan[2].variable = 7;
  BOOST_TEST(error_of(plan).find("names variable 7 of a model with 3") != std::string::npos);
  plan = good_plan();
  plan[1].extent = 3; // rows 3..5 of a 5-row variable
  BOOST_TEST(error_of(plan).find("does not fit w [5, 3]") != std::string::npos);
  plan = good_plan();
  plan[2].axis = 1;
  BOOST_TEST(error_of(plan).find("beyond the rank of b") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(values_round_trip_through_the_slices) {
  slice_router router(good_plan(), model_vars(), 2);
  std::vector<tensor> values{counting({5, 3}, 0), counting({3}, 100), counting({2, 4}, 200)};
  auto original = values;
  std::vector<tensor> sent[2];
  for (auto& part : router.parts())
    sent[part.shard] = router.cut(part, values);
  // b travels whole: moved out, not copied; the split variables stay.
  BOOST_TEST(values[1].empty());
  BOOST_TEST(sent[1][1].bit_equal(original[1]));
  BOOST_TEST(sent[0][2].shape() == (shape_t{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(sent[0][2][0] == 201.0f); // row 0, column 1 of k
  std::vector<tensor> received(3);
  received[0] = tensor({5, 3}, -1.0f);
  received[2] = tensor({2, 4}, -1.0f);
  for (auto& part : router.parts())
    router.gather(part, std::move(sent[part.shard]), received);
  for (size_t v = 0; v < 3; ++v)
    BOOST_TEST(received[v].bit_equal(original[v]), "variable " << v);
}

BOOST_AUTO_TEST_CASE(values_round_trip_through_staging_buffers) {
  slice_router router(good_plan(), model_vars(), 2);
  std::vector<tensor> values{counting({5, 3}, 0), counting({3}, 100), counting({2, 4}, 200)};
  std::vector<float*> buffers{values[0].data(), values[1].data(), values[2].data()};
  std::vector<tensor> copies{tensor({5, 3}, -1.0f), tensor({3}, -1.0f), tensor({2, 4}, -1.0f)};
  std::vector<float*> targets{copies[0].data(), copies[1].data(), copies[2].data()};
  for (auto& part : router.parts())
    router.gather(part, router.cut(part, buffers), targets);
  for (size_t v = 0; v < 3; ++v)
    BOOST_TEST(copies[v].bit_equal(values[v]), "variable " << v);
  // A reply with another count of values is an error, not a partial update.
  std::vector<tensor> short_reply{tensor({3, 3})};
  BOOST_CHECK_THROW(router.gather(router.parts()[0], std::move(short_reply), copies), troupe_error);
  std::vector<tensor> wrong_shape{tensor({3, 2}), tensor({2, 1}), tensor({2, 3})};
  BOOST_CHECK_THROW(router.gather(router.parts()[0], wrong_shape, targets), shape_error);
}

BOOST_AUTO_TEST_SUITE_END()
