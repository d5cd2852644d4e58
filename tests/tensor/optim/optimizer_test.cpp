// Every optimizer and schedule against references worked out by hand with
// TF 1.x's formulas, over several steps.
#include <cmath>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/optim/optimizer.hpp"

using namespace troupe;

namespace {

// The gradients of the three steps run() takes.
constexpr double gradients[] = {0.5, -0.3, 0.2};

// Runs three steps on one scalar variable starting at 1 with these gradients.
std::vector<double> run(optimizer_config c) {
  auto opt = make_optimizer(c);
  tensor var({1}, 1.0f);
  std::vector<double> out;
  int64_t step = 0;
  for (double g : gradients) {
    opt->apply("v", var, tensor({1}, static_cast<float>(g)), step++);
    out.push_back(var[0]);
  }
  return out;
}

// The values of the reference rule: from 1, minus update(g, t) at step t
// (1, 2, 3) for each of the gradients.
template <class Update>
std::vector<double> reference(Update update) {
  double v = 1.0;
  std::vector<double> out;
  int t = 0;
  for (double g : gradients)
    out.push_back(v -= update(g, ++t));
  return out;
}

void expect(const std::vector<double>& got, const std::vector<double>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(got[i] == want[i], boost::test_tools::tolerance(1e-6));
}

} // namespace

BOOST_AUTO_TEST_SUITE(optimizers)

BOOST_AUTO_TEST_CASE(sgd) {
  // 1 - 0.1*0.5 = 0.95; + 0.03 = 0.98; - 0.02 = 0.96
  expect(run(plain_sgd(0.1)), {0.95, 0.98, 0.96});
}

BOOST_AUTO_TEST_CASE(momentum_and_nesterov) {
  auto c = plain_sgd(0.1);
  c.kind = optimizer_kind::momentum;
  c.momentum = 0.9;
  // accum: 0.5, 0.45 - 0.3 = 0.15, 0.135 + 0.2 = 0.335
  expect(run(c), {0.95, 0.935, 0.9015});
  c.nesterov = true;
  // var -= lr*g + lr*m*accum: 0.05 + 0.045 = 0.095 -> 0.905;
  // -0.03 + 0.0135 = -0.0165 -> 0.9215; 0.02 + 0.03015 = 0.05015 -> 0.87135
  expect(run(c), {0.905, 0.9215, 0.87135});
}

BOOST_AUTO_TEST_CASE(adagrad) {
  auto c = plain_sgd(0.1);
  c.kind = optimizer_kind::adagrad;
  c.initial_accumulator = 0.1;
  double acc = 0.1;
  auto want = reference([&](double g, int) {
    acc += g * g;
    return 0.1 * g / std::sqrt(acc);
  });
  BOOST_TEST(want[0] == 1.0 - 0.05 / std::sqrt(0.35), boost::test_tools::tolerance(1e-12));
  expect(run(c), want);
}

BOOST_AUTO_TEST_CASE(rmsprop_starts_its_mean_square_at_one) {
  auto c = plain_sgd(0.01);
  c.kind = optimizer_kind::rmsprop;
  c.rms_decay = 0.9;
  c.rms_momentum = 0.5;
  double ms = 1.0, mom = 0.0;
  auto want = reference([&](double g, int) {
    ms = 0.9 * ms + 0.1 * g * g;
    return mom = 0.5 * mom + 0.01 * g / std::sqrt(ms + 1e-10);
  });
  // First step by hand: ms = 0.925, mom = 0.005 / 0.961769 = 0.0051987.
  BOOST_TEST(want[0] == 1.0 - 0.005 / std::sqrt(0.925), boost::test_tools::tolerance(1e-9));
  expect(run(c), want);
}

BOOST_AUTO_TEST_CASE(adam_with_bias_correction) {
  auto c = plain_sgd(0.001);
  c.kind = optimizer_kind::adam;
  double m = 0, s = 0;
  auto want = reference([&](double g, int t) {
    double lr_t = 0.001 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    m = 0.9 * m + 0.1 * g;
    s = 0.999 * s + 0.001 * g * g;
    return lr_t * m / (std::sqrt(s) + 1e-8);
  });
  // Adam's first step moves by almost exactly lr, whatever the gradient's size.
  BOOST_TEST(want[0] == 0.999, boost::test_tools::tolerance(1e-6));
  expect(run(c), want);
}

// A moment that decays below the smallest normal float becomes zero, as in
// TF (flush-to-zero), instead of a denormal that costs x86 cores tens of
// cycles per operation on every later step.
BOOST_AUTO_TEST_CASE(moments_flush_to_zero_instead_of_going_denormal) {
  auto c = plain_sgd(0.001);
  c.kind = optimizer_kind::momentum;
  c.momentum = 0.5;
  auto opt = make_optimizer(c);
  tensor var({2}, 1.0f);
  const float smallest_normal = std::numeric_limits<float>::min();
  opt->apply("v", var, tensor({2}, 2 * smallest_normal), 0); // accum = 2 * min: normal
  opt->apply("v", var, tensor({2}, 0.0f), 1);                // accum = min: normal
  BOOST_TEST((*opt->slots().at("v/momentum"))[0] == smallest_normal);
  opt->apply("v", var, tensor({2}, 0.0f), 2); // min / 2 would be denormal
  BOOST_TEST((*opt->slots().at("v/momentum"))[0] == 0.0f);
  // The mode is restored after the update: this thread still has denormals.
  volatile float half = 0.5f;
  BOOST_TEST(smallest_normal * half > 0.0f);
}

BOOST_AUTO_TEST_CASE(slots_live_with_their_variable) {
  auto c = plain_sgd(0.001);
  c.kind = optimizer_kind::adam;
  auto opt = make_optimizer(c);
  tensor w({3}, 1.0f), b({2}, 1.0f);
  opt->apply("fc/weights", w, tensor({3}, 0.1f), 0);
  opt->apply("fc/biases", b, tensor({2}, 0.1f), 0);
  auto slots = opt->slots();
  BOOST_TEST(slots.size() == 4u);
  BOOST_TEST(slots.count("fc/weights/Adam") == 1u);
  BOOST_TEST(slots.at("fc/biases/Adam_1")->size() == 2u);
  BOOST_CHECK_THROW(opt->apply("fc/weights", w, tensor({2}), 1), shape_error);
}

BOOST_AUTO_TEST_CASE(schedules) {
  lr_schedule exp{lr_schedule::kind::exponential_decay, 0.001, 1000, 0.5, false, {}, {}};
  BOOST_TEST(exp.at(0) == 0.001, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(exp.at(500) == 0.001 * std::sqrt(0.5), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(exp.at(2000) == 0.00025, boost::test_tools::tolerance(1e-12));
  exp.staircase = true;
  BOOST_TEST(exp.at(1500) == 0.0005, boost::test_tools::tolerance(1e-12));
  lr_schedule pw{
    lr_schedule::kind::piecewise_constant, 0, 0, 0, false, {100, 200}, {1.0, 0.5, 0.1}};
  BOOST_TEST(!pw.check());
  BOOST_TEST(pw.at(100) == 1.0);
  BOOST_TEST(pw.at(101) == 0.5);
  BOOST_TEST(pw.at(201) == 0.1);
  pw.values.pop_back();
  auto err = pw.check();
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::invalid_setting));
  BOOST_TEST(err->message.find("one more value") != std::string::npos);
  // The optimizer reads the schedule at the step it is given.
  auto c = plain_sgd(0.1);
  c.learning_rate = exp;
  auto opt = make_optimizer(c);
  BOOST_TEST(opt->learning_rate_at(1000) == 0.0005, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bad_configurations_are_refused) {
  BOOST_CHECK_THROW(make_optimizer(plain_sgd(-1)), troupe_error);
  auto c = plain_sgd(0.1);
  c.kind = optimizer_kind::momentum;
  c.momentum = 1.5;
  auto err = c.check();
  BOOST_REQUIRE(err);
  BOOST_TEST(err->message.find("momentum must be in [0, 1)") != std::string::npos, err->message);
  BOOST_CHECK_THROW(make_optimizer(c), troupe_error);
}

BOOST_AUTO_TEST_CASE(optimizer_names_round_trip) {
  for (auto& [kind, name] : enum_names<optimizer_kind>::table) {
    BOOST_TEST((enum_from_name<optimizer_kind>(name) == kind));
    BOOST_TEST(std::string(name_of(kind)) == name);
  }
  BOOST_TEST(!enum_from_name<optimizer_kind>("lamb"));
  BOOST_TEST(name_list<optimizer_kind>() == "sgd, momentum, adagrad, rmsprop, adam");
}

BOOST_AUTO_TEST_CASE(clipping_by_global_norm) {
  std::vector<tensor> grads{tensor({1}, 3.0f), tensor({1}, 4.0f)};
  BOOST_TEST(clip_by_global_norm(grads, 1.0) == 5.0);
  BOOST_TEST(grads[0][0] == 0.6f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(grads[1][0] == 0.8f, boost::test_tools::tolerance(1e-6f));
  clip_by_global_norm(grads, 10.0); // under the clip: unchanged
  BOOST_TEST(grads[1][0] == 0.8f, boost::test_tools::tolerance(1e-6f));
  // A norm computed where the gradients were (a GPU) is used as given.
  std::vector<tensor> known{tensor({1}, 3.0f), tensor({1}, 4.0f)};
  BOOST_TEST(clip_by_global_norm(known, 2.5, 10.0) == 10.0);
  BOOST_TEST(known[1][0] == 1.0f, boost::test_tools::tolerance(1e-6f)); // 4 x 2.5 / 10
  // Raw buffers (a model's staging) clip the same way.
  std::vector<float> a{3.0f, 0.0f}, b{4.0f};
  std::vector<float*> buffers{a.data(), b.data()};
  BOOST_TEST(clip_by_global_norm(buffers, {2, 1}, 1.0) == 5.0);
  BOOST_TEST(a[0] == 0.6f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(b[0] == 0.8f, boost::test_tools::tolerance(1e-6f));
  BOOST_CHECK_THROW(clip_by_global_norm(buffers, {2}, 1.0), troupe_error);
}

BOOST_AUTO_TEST_SUITE_END()
