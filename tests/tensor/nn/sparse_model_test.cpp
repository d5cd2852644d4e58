// The embedding models (tensor/nn/sparse_model.hpp): every gradient, dense
// and per row, against finite differences; mf against its formula; the
// problems make_model names.
#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/nn/model.hpp"
#include "tensor/sparse/keys.hpp"
#include "tests/tensor/nn/table_model_checks.hpp"

using namespace troupe;

namespace {

constexpr key_layout layout{2, 3, 2};

using testing::categorical_batch;
using testing::table_fixture;

table_fixture make(model_kind kind, objective task, key_layout keys = layout) {
  std::mt19937 rng(7);
  model_options o;
  o.keys = keys;
  o.task = task;
  o.classes = task == objective::regression ? 1 : 2;
  o.embedding_dim = 3;
  o.deep_layers = {4};
  table_fixture f;
  f.net = make_model(kind, o);
  f.params = initial_values(*f.net, 3);
  std::uniform_real_distribution<float> unit(-0.5f, 0.5f);
  for (auto& p : f.params)
    for (size_t i = 0; i < p.size(); ++i)
      p.data()[i] += unit(rng);
  f.b = categorical_batch(6, task, keys, rng);
  f.look_up([&] { return unit(rng); });
  return f;
}

void check_gradients(model_kind kind, objective task) {
  auto f = make(kind, task);
  testing::check_table_gradients(f, name_of(kind));
}

} // namespace

BOOST_AUTO_TEST_SUITE(sparse_models)

BOOST_AUTO_TEST_CASE(lr_fm_and_deepfm_gradients_match_finite_differences) {
  for (auto kind : {model_kind::lr, model_kind::fm, model_kind::deepfm}) {
    check_gradients(kind, objective::classification);
    check_gradients(kind, objective::regression);
  }
}

BOOST_AUTO_TEST_CASE(mf_is_bias_plus_both_weights_plus_the_factors_dot_product) {
  constexpr key_layout pair{0, 2, 1};
  auto f = make(model_kind::mf, objective::regression, pair);
  BOOST_TEST(f.net->tables()[0].dim == 4u);
  BOOST_TEST(f.net->variables().size() == 1u); // the global bias
  tensor out;
  f.net->predict_rows(f.params, f.b, f.rows, out);
  std::vector<int64_t> ids;
  f.net->batch_keys(f.b, ids);
  auto& inverse = f.rows.keys.inverse();
  size_t o = 0;
  for (size_t e = 0; e < f.b.size(); ++e) {
    const float* x = f.b.images.data() + e * 8;
    double expected = f.params[0].data()[0];
    std::vector<const float*> used;
    std::vector<float> weight;
    for (int s = 0; s < 2; ++s)
      if (unpack_key(x + s * 4) >= 0) {
        used.push_back(f.rows.values.data() + inverse[o++] * 4);
        weight.push_back(x[s * 4 + 3]);
      }
    for (size_t k = 0; k < used.size(); ++k)
      expected += weight[k] * used[k][0];
    if (used.size() == 2)
      for (int j = 1; j < 4; ++j)
        expected += weight[0] * weight[1] * used[0][j] * used[1][j];
    BOOST_TEST(out.data()[e] == expected, boost::test_tools::tolerance(1e-5));
  }
}

BOOST_AUTO_TEST_CASE(make_model_names_what_does_not_fit) {
  auto refused = [](model_kind kind, model_options o) -> std::string {
    try {
      make_model(kind, o);
    } catch (const troupe_error& e) {
      return e.what();
    }
    return "built";
  };
  model_options o;
  o.classes = 2;
  BOOST_TEST(refused(model_kind::fm, o).find("categorical") != std::string::npos);
  o.keys = layout;
  BOOST_TEST(refused(model_kind::mf, o).find("two fields") != std::string::npos);
  o.embedding_dim = 0;
  BOOST_TEST(refused(model_kind::fm, o).find("embedding.dim") != std::string::npos);
  o.embedding_dim = 4;
  o.classes = 10;
  BOOST_TEST(refused(model_kind::lr, o).find("two classes") != std::string::npos);
  o.classes = 2;
  BOOST_TEST(refused(model_kind::deepfm, o) == "built");
  o.vocabulary = {10, 10}; // the layout has 3 fields
  BOOST_TEST(refused(model_kind::fm, o).find("embedding.vocabulary lists 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_fixed_size_table_looks_up_each_fields_ids_at_its_offset) {
  constexpr key_layout pair{0, 2, 1};
  model_options o;
  o.keys = pair;
  o.task = objective::regression;
  o.classes = 1;
  o.embedding_dim = 2;
  o.vocabulary = {5, 7};
  auto net = make_model(model_kind::mf, o);
  batch b;
  b.images = tensor({2, pair.width()});
  b.labels = {0, 0};
  b.targets = {1.0f, 2.0f};
  pack_key(field_key(0, "4"), 1.0f, b.images.data());
  pack_key(field_key(1, "6"), 1.0f, b.images.data() + 4);
  pack_key(field_key(0, "0"), 1.0f, b.images.data() + 8);
  pack_key(key_layout::no_key, 1.0f, b.images.data() + 12);
  std::vector<int64_t> ids;
  net->batch_keys(b, ids);
  BOOST_TEST(ids == (std::vector<int64_t>{4, 5 + 6, 0}), boost::test_tools::per_element());
  pack_key(field_key(1, "7"), 1.0f, b.images.data() + 12); // past the item field's 7 rows
  BOOST_CHECK_THROW(net->batch_keys(b, ids), data_error);
}

BOOST_AUTO_TEST_SUITE_END()
