#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/model.hpp"

using namespace troupe;

namespace {

// A custom model of `layers` over 4x4x1 examples.
model_options four_by_four(std::vector<std::string> layers) {
  model_options options;
  options.layers = std::move(layers);
  options.input = {4, 4, 1};
  return options;
}

// A batch of five 16-value examples, value(i) at flat index i, labels 0..4.
template <class Value>
batch five_examples(Value value) {
  batch b;
  b.images = tensor({5, 16});
  for (size_t i = 0; i < b.images.size(); ++i)
    b.images[i] = value(i);
  b.labels = {0, 1, 2, 3, 4};
  return b;
}

} // namespace

BOOST_AUTO_TEST_SUITE(models)

BOOST_AUTO_TEST_CASE(softmax_gradients_match_finite_differences) {
  auto net = make_softmax_model(6, 4);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<tensor> params;
  for (auto& v : net->variables()) {
    tensor t(v.shape);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = dist(rng);
    params.push_back(t);
  }
  batch b;
  b.images = tensor({5, 6});
  for (size_t i = 0; i < b.images.size(); ++i)
    b.images[i] = dist(rng);
  b.labels = {0, 1, 2, 3, 1};
  std::vector<tensor> grads;
  net->train_step(params, b, grads);
  BOOST_REQUIRE(grads.size() == 2u);
  for (size_t v = 0; v < params.size(); ++v)
    for (size_t i = 0; i < params[v].size(); ++i) {
      const float h = 1e-2f;
      auto plus = params, minus = params;
      plus[v][i] += h;
      minus[v][i] -= h;
      double numeric = (net->evaluate(plus, b).loss - net->evaluate(minus, b).loss) / (2.0 * h);
      double denom = std::max(1e-3, std::fabs(numeric) + std::fabs(double(grads[v][i])));
      BOOST_TEST(std::fabs(numeric - grads[v][i]) / denom < 1e-3,
                 net->variables()[v].name << "[" << i << "]");
    }
}

BOOST_AUTO_TEST_CASE(wrong_parameter_shapes_are_refused) {
  auto net = make_model(model_kind::softmax);
  batch b;
  b.images = tensor({1, 784});
  b.labels = {0};
  std::vector<tensor> grads;
  std::vector<tensor> params{tensor({784, 9}), tensor({10})};
  BOOST_CHECK_THROW(net->train_step(params, b, grads), shape_error);
}

BOOST_AUTO_TEST_CASE(model_kinds_are_named_as_in_the_config_file) {
  for (auto& [kind, name] : enum_names<model_kind>::table) {
    BOOST_TEST((enum_from_name<model_kind>(name) == kind));
    if (kind == model_kind::declared) // its workers' programs declare it (declared_model_test)
      continue;
    // C++17 lambdas cannot capture a structured binding (clang refuses).
    const model_kind k = kind;
    BOOST_TEST(make_model(kind,
                          [k] {
                            model_options o;
                            o.layers = {"dense units=10"};
                            if (uses_embeddings(k)) {
                              o.keys = {0, 2, 1};
                              o.classes = 2;
                            }
                            return o;
                          }())
                 ->name()
               == name);
  }
  BOOST_TEST(!enum_from_name<model_kind>("resnet"));
  BOOST_TEST(
    name_list<model_kind>()
    == "softmax, mlp, cnn, vgg11, vgg16, vgg19, custom, lr, fm, mf, deepfm, synthetic, declared");
  BOOST_CHECK_THROW(make_model(static_cast<model_kind>(99)), troupe_error);
}

BOOST_AUTO_TEST_CASE(initial_values_are_deterministic_per_name) {
  variable_spec a{"fc/weights", {30, 20}, {initializer::kind::truncated_normal, 0.1f}};
  variable_spec b{"fc2/weights", {30, 20}, {initializer::kind::truncated_normal, 0.1f}};
  auto a1 = initial_value(a, 1), a2 = initial_value(a, 1), a3 = initial_value(a, 2);
  BOOST_TEST(a1.bit_equal(a2));
  BOOST_TEST(!a1.bit_equal(a3));
  BOOST_TEST(!a1.bit_equal(initial_value(b, 1)));
  for (size_t i = 0; i < a1.size(); ++i)
    BOOST_TEST(std::fabs(a1[i]) <= 0.2f); // truncated at two standard deviations
  variable_spec g{"g", {50, 50}, {initializer::kind::glorot_uniform, 0}};
  auto gv = initial_value(g, 1);
  float limit = std::sqrt(6.0f / 100.0f);
  for (size_t i = 0; i < gv.size(); ++i)
    BOOST_TEST(std::fabs(gv[i]) <= limit);
  variable_spec c{"c", {3}, {initializer::kind::constant, 0.1f}};
  BOOST_TEST(initial_value(c, 9)[2] == 0.1f);
}

BOOST_AUTO_TEST_CASE(evaluation_covers_the_whole_dataset) {
  auto net = make_softmax_model(2, 2);
  dataset data;
  data.images = tensor({5, 2}, std::vector<float>{1, 0, 0, 1, 1, 0, 0, 1, 1, 0});
  data.labels = {0, 1, 0, 1, 1};
  // weights map feature i to class i: 4 of 5 are right.
  std::vector<tensor> params{tensor({2, 2}, std::vector<float>{5, 0, 0, 5}), tensor({2})};
  auto stats = evaluate_dataset(*net, params, evaluation_set(std::make_shared<dataset>(data)), 2);
  BOOST_TEST(stats.examples == 5u);
  BOOST_TEST(stats.correct == 4u);
}

// A worker restored from a checkpoint skips the dropout masks of the steps
// it already took: its next step draws what the uninterrupted one draws.
BOOST_AUTO_TEST_CASE(a_restored_model_continues_its_dropout_masks) {
  auto options = four_by_four(
    {"flatten", "dense units=16", "relu", "dropout rate=0.5", "dense units=10"});
  auto original = make_model(model_kind::custom, options),
       restored = make_model(model_kind::custom, options);
  auto params = initial_values(*original, 3);
  auto b = five_examples([](size_t i) { return static_cast<float>(i % 7) / 7.0f; });
  std::vector<tensor> earlier, grads, restored_grads;
  for (int step = 0; step < 3; ++step)
    original->train_step(params, b, earlier);
  restored->skip_training_steps(3, 5);
  original->train_step(params, b, grads);
  restored->train_step(params, b, restored_grads);
  for (size_t i = 0; i < grads.size(); ++i)
    BOOST_TEST(grads[i].bit_equal(restored_grads[i]));
  auto fresh = make_model(model_kind::custom, options); // without the skip: other masks
  std::vector<tensor> fresh_grads;
  fresh->train_step(params, b, fresh_grads);
  BOOST_TEST(!grads[0].bit_equal(fresh_grads[0]));
}

// Workers reuse one gradient buffer across steps: where it lies in memory
// must not change a single bit of the gradients (Eigen's column sums once
// followed the destination's alignment).
BOOST_AUTO_TEST_CASE(gradients_do_not_depend_on_the_buffer_they_land_in) {
  auto options = four_by_four(
    {"conv2d filters=3 kernel=3", "relu", "flatten", "dense units=16", "relu", "dense units=10"});
  auto reusing = make_model(model_kind::custom, options),
       fresh = make_model(model_kind::custom, options);
  auto params = initial_values(*reusing, 3);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto b = five_examples([&](size_t) { return dist(rng); });
  std::vector<tensor> reused;
  for (int step = 0; step < 4; ++step) {
    reusing->train_step(params, b, reused);
    // Fresh buffers at every offset a float allocation may have.
    for (size_t shift = 0; shift < 8; ++shift) {
      std::vector<float> pad(shift + 1);
      std::vector<tensor> grads;
      fresh->train_step(params, b, grads);
      for (size_t i = 0; i < grads.size(); ++i)
        BOOST_TEST(grads[i].bit_equal(reused[i]), reusing->variables()[i].name << " step " << step);
    }
  }
}

// Regression: the built-in models end in one output trained with mean
// squared error; plain gradient steps fit a linear target.
BOOST_AUTO_TEST_CASE(a_regression_model_fits_a_linear_target) {
  model_options options;
  options.input = {3};
  options.classes = 1;
  options.task = objective::regression;
  auto net = make_model(model_kind::softmax, options);
  BOOST_REQUIRE(net->variables()[0].shape == (shape_t{3, 1}));
  BOOST_CHECK_THROW(make_model(model_kind::mlp,
                               [&] {
                                 auto two = options;
                                 two.classes = 2;
                                 return two;
                               }()),
                    troupe_error);
  auto params = initial_values(*net, 1);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  batch b;
  b.images = tensor({32, 3});
  b.labels.assign(32, 0);
  std::vector<tensor> grads;
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    b.targets.clear();
    for (int r = 0; r < 32; ++r) {
      for (int c = 0; c < 3; ++c)
        b.images[r * 3 + c] = dist(rng);
      b.targets.push_back(2.0f * b.images[r * 3] - b.images[r * 3 + 2] + 0.5f);
    }
    auto stats = net->train_step(params, b, grads);
    (step == 0 ? first : last) = stats.loss;
    for (size_t v = 0; v < params.size(); ++v)
      for (size_t i = 0; i < params[v].size(); ++i)
        params[v][i] -= 0.05f * grads[v][i];
  }
  BOOST_TEST(first > 1.0);
  BOOST_TEST(last < 1e-4);
  BOOST_TEST(std::fabs(params[0][0] - 2.0f) < 0.01f);
  BOOST_TEST(std::fabs(params[1][0] - 0.5f) < 0.01f);
}

BOOST_AUTO_TEST_SUITE_END()
