// Custom networks over an embedding layer (tensor/nn/embedding_network.hpp):
// every gradient, of the rows and of the layers' variables, against finite
// differences for each combiner, with weighted multi-key fields, empty
// fields and dense values; the layer's output against its formula; the
// problems make_model names.
#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/model.hpp"
#include "tests/support/errors.hpp"
#include "tests/tensor/nn/table_model_checks.hpp"

using namespace troupe;

namespace {

// 2 dense values, 3 fields of 2 key slots each.
constexpr key_layout test_layout{2, 3, 2};

model_options options_of(std::vector<std::string> layers, objective task,
                         key_layout keys = test_layout) {
  model_options o;
  o.layers = std::move(layers);
  o.keys = keys;
  o.task = task;
  o.classes = task == objective::regression ? 1 : 2;
  return o;
}

using testing::table_fixture;

table_fixture make(const model_options& o, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  table_fixture f;
  f.net = make_model(model_kind::custom, o);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (auto& v : f.net->variables()) {
    tensor t(v.shape);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = normal(rng);
    f.params.push_back(std::move(t));
  }
  f.b = testing::categorical_batch(6, o.task, o.keys, rng);
  f.look_up([&] { return normal(rng); });
  return f;
}

void check_gradients(const std::string& combiner, objective task) {
  // No ReLU: a finite difference across its kink would not be its gradient.
  auto o = options_of({"embedding dim=3 combiner=" + combiner, "dense units=4",
                       task == objective::regression ? "dense units=1" : "dense units=2"},
                      task);
  auto f = make(o);
  testing::check_table_gradients(
    f, combiner + (task == objective::regression ? " regression" : " classification"));
}

std::string error_of(const model_options& o) {
  return testing::message_of<troupe_error>([&] { make_model(model_kind::custom, o); });
}

} // namespace

BOOST_AUTO_TEST_SUITE(embedding_networks)

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_for_every_combiner) {
  for (auto combiner : {"sum", "mean", "sqrtn"}) {
    check_gradients(combiner, objective::classification);
    check_gradients(combiner, objective::regression);
  }
}

// One dense unit over [field 0 | field 1 | dense]: y = W · input + b, with
// each field its keys' rows combined as TF's combiners do.
BOOST_AUTO_TEST_CASE(fields_are_combined_then_concatenated_with_the_dense_values) {
  constexpr key_layout keys{1, 2, 2};
  for (auto how : {combiner::sum, combiner::mean, combiner::sqrtn}) {
    auto o = options_of({"embedding dim=2 combiner=" + std::string(name_of(how)), "dense units=1"},
                        objective::regression, keys);
    auto f = make(o, 11);
    BOOST_TEST(f.net->tables()[0].dim == 2u);
    BOOST_REQUIRE(f.net->variables().size() == 2u);
    BOOST_TEST((f.net->variables()[0].shape == shape_t{5, 1}));
    tensor out;
    f.net->predict_rows(f.params, f.b, f.rows, out);
    BOOST_REQUIRE(out.size() == f.b.size());
    auto& inverse = f.rows.keys.inverse();
    const float* w = f.params[0].data();
    size_t o_index = 0;
    for (size_t e = 0; e < f.b.size(); ++e) {
      const float* x = f.b.images.data() + e * static_cast<size_t>(keys.width());
      double y = f.params[1].data()[0] + w[4] * x[0];
      for (int field = 0; field < 2; ++field) {
        double v[2] = {0, 0}, total = 0;
        for (int k = 0; k < 2; ++k) {
          const float* slot = x + 1 + (field * 2 + k) * key_layout::floats_per_key;
          if (unpack_key(slot) < 0)
            continue;
          const float* row = f.rows.values.data() + inverse[o_index++] * 2;
          float a = slot[3];
          total += how == combiner::mean ? a : a * a;
          v[0] += a * row[0];
          v[1] += a * row[1];
        }
        double divisor = how == combiner::sum || total <= 0 ? 1
                         : how == combiner::mean            ? total
                                                            : std::sqrt(total);
        y += w[2 * field] * v[0] / divisor + w[2 * field + 1] * v[1] / divisor;
      }
      BOOST_TEST(std::fabs(out.data()[e] - y) < 1e-5,
                 "example " << e << ": " << out.data()[e] << " against " << y);
    }
    BOOST_TEST(o_index == inverse.size());
  }
}

// The score of a binary network is the log-odds of class 1: the loss of a
// batch is what the scores say it is.
BOOST_AUTO_TEST_CASE(a_binary_networks_score_is_the_log_odds_of_class_one) {
  auto f = make(options_of({"embedding dim=2", "dense units=2"}, objective::classification));
  tensor scores;
  f.net->predict_rows(f.params, f.b, f.rows, scores);
  double loss = 0;
  for (size_t e = 0; e < f.b.size(); ++e) {
    double z = scores.data()[e];
    double p = 1 / (1 + std::exp(-z));
    loss -= std::log(f.b.labels[e] == 1 ? p : 1 - p);
  }
  BOOST_TEST(std::fabs(loss / static_cast<double>(f.b.size()) - f.loss()) < 1e-5);
  BOOST_TEST(uses_embeddings(model_kind::custom, {"embedding dim=2", "dense units=2"}));
  BOOST_TEST(!uses_embeddings(model_kind::custom, {"dense units=2"}));
  BOOST_TEST((f.net->layers().front().type == layer_desc::kind::embedding));
  BOOST_TEST((f.net->layers().front().output == shape_t{3 * 2 + 2}));
}

BOOST_AUTO_TEST_CASE(problems_are_named) {
  using testing::contains;
  auto regression = objective::regression;
  auto dense = options_of({"embedding dim=4", "dense units=1"}, regression, key_layout{});
  BOOST_TEST(contains(error_of(dense), "needs categorical data"), error_of(dense));
  auto later = options_of({"dense units=4", "embedding dim=4", "dense units=1"}, regression);
  later.input = {8};
  BOOST_TEST(contains(error_of(later), "an embedding layer comes first"), error_of(later));
  auto alone = options_of({"embedding dim=4"}, regression);
  BOOST_TEST(contains(error_of(alone), "needs the layers that follow it"), error_of(alone));
  auto wide = options_of({"embedding dim=4", "dense units=3"}, objective::classification);
  BOOST_TEST(contains(error_of(wide), "2 units (the logits of no and yes)"), error_of(wide));
  auto huge = options_of({"embedding dim=4096", "dense units=1"}, regression);
  BOOST_TEST(contains(error_of(huge), "dim=4096 is outside 1..1024"), error_of(huge));
  auto odd = options_of({"embedding dim=4 combiner=max", "dense units=1"}, regression);
  BOOST_TEST(contains(error_of(odd), "combiner=max is not sum, mean or sqrtn"), error_of(odd));
  auto typo = options_of({"embedding dims=4", "dense units=1"}, regression);
  BOOST_TEST(contains(error_of(typo), "unknown parameter 'dims'"), error_of(typo));
  auto three = options_of({"embedding dim=4", "dense units=2"}, objective::classification);
  three.classes = 3;
  BOOST_TEST(contains(error_of(three), "classifies two classes"), error_of(three));
}

BOOST_AUTO_TEST_SUITE_END()
