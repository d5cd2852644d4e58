// The synthetic model (tensor/nn/synthetic_model.hpp): a step costs the time
// it is given and moves a gradient of the size it is given; what it cannot
// be is refused.
#include <chrono>

#include <boost/test/unit_test.hpp>

#include "tensor/nn/model.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(synthetic_models)

BOOST_AUTO_TEST_CASE(a_step_costs_its_time_and_moves_its_floats) {
  for (bool busy : {false, true}) {
    model_options o;
    o.synthetic = {20, busy, 1234};
    auto net = make_model(model_kind::synthetic, o);
    BOOST_REQUIRE(net->variables().size() == 1u);
    BOOST_TEST(net->variables()[0].shape == (shape_t{1234}));
    batch b;
    b.images = tensor({3, 784});
    b.labels = {0, 1, 2};
    std::vector<tensor> params{tensor({1234})}, grads;
    auto start = std::chrono::steady_clock::now();
    auto stats = net->train_step(params, b, grads);
    double took_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST(took_ms >= 20.0);
    BOOST_TEST(stats.examples == 3u);
    BOOST_REQUIRE(grads.size() == 1u);
    BOOST_TEST(grads[0].size() == 1234);
    BOOST_TEST(grads[0][1233] == 1e-3f);
  }
}

BOOST_AUTO_TEST_CASE(out_of_range_settings_are_refused) {
  model_options o;
  o.synthetic.floats = 0;
  BOOST_CHECK_THROW(make_model(model_kind::synthetic, o), troupe_error);
  o.synthetic = {-1, false, 10};
  BOOST_CHECK_THROW(make_model(model_kind::synthetic, o), troupe_error);
  BOOST_TEST((enum_from_name<model_kind>("synthetic") == model_kind::synthetic));
}

BOOST_AUTO_TEST_SUITE_END()
