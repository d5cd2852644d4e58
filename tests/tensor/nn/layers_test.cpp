// Every layer's backward pass against central finite differences of its
// forward pass (the loss L = sum(y * r) accumulated in double, so dL/dy = r),
// and whole models the same way.
#include <algorithm>
#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/layer_spec.hpp"
#include "tensor/nn/layers.hpp"
#include "tensor/nn/model.hpp"
#include "tests/support/tensors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// Values kept away from 0 and from each other, so that ReLU kinks and
// max-pool ties stay outside the finite-difference step.
tensor spread_tensor(shape_t shape, uint32_t seed) {
  tensor t(std::move(shape));
  std::vector<float> v(t.size());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (static_cast<float>(i) - static_cast<float>(v.size()) / 2.0f + 0.5f) * 0.1f;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (size_t i = 0; i < v.size(); ++i)
    t[i] = v[i];
  return t;
}

double weighted_sum(const tensor& y, const tensor& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i)
    s += double(y[i]) * double(r[i]);
  return s;
}

double rel_error(double numeric, double analytic) {
  return std::fabs(numeric - analytic) / std::max(1e-2, std::fabs(numeric) + std::fabs(analytic));
}

// Checks dL/dx and dL/dparams of one layer on input x.
void check_layer(layer& l, shape_t per_example, int64_t batch, tensor x, uint32_t seed,
                 float h = 1e-2f) {
  auto out_shape = l.configure(per_example);
  std::vector<tensor> params;
  for (auto& v : l.variables())
    params.push_back(random_tensor(v.shape, seed++, -0.5f, 0.5f));
  tensor y;
  l.forward(x, y, params.data(), true);
  BOOST_REQUIRE_EQUAL(y.size(), static_cast<size_t>(batch * num_elements(out_shape)));
  auto r = random_tensor(y.shape(), seed++);
  tensor dx;
  std::vector<tensor> grads(params.size());
  l.backward(x, y, r, &dx, params.data(), grads.data());
  auto loss = [&](const tensor& xx, const std::vector<tensor>& pp) {
    tensor yy;
    l.forward(xx, yy, pp.data(), true);
    return weighted_sum(yy, r);
  };
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    auto plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    worst = std::max(worst,
                     rel_error((loss(plus, params) - loss(minus, params)) / (2.0 * h), dx[i]));
  }
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < params[p].size(); ++i) {
      auto plus = params, minus = params;
      plus[p][i] += h;
      minus[p][i] -= h;
      worst = std::max(worst, rel_error((loss(x, plus) - loss(x, minus)) / (2.0 * h), grads[p][i]));
    }
  BOOST_TEST(worst < 1e-3, l.name() << " (" << l.describe() << "): worst relative error " << worst);
}

// A conv2d layer: [h, w, ch] examples, `filters` k x k filters.
struct conv_case {
  int64_t h, w, ch, filters, k, stride;
  padding pad;
};

// check_layer for a conv2d layer of each case, on 2 examples (random, seed
// `input_seed`); `seed` and `h` as check_layer's.
void check_conv2d(std::initializer_list<conv_case> cases, uint32_t input_seed, uint32_t seed,
                  float h = 1e-2f) {
  for (auto p : cases) {
    auto l = make_conv2d("conv", p.filters, p.k, p.k, p.stride, p.pad, {}, {});
    check_layer(*l, {p.h, p.w, p.ch}, 2, random_tensor({2, p.h, p.w, p.ch}, input_seed), seed, h);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(layer_gradients)

BOOST_AUTO_TEST_CASE(dense) {
  auto l = make_dense("fc", 5, {initializer::kind::zeros, 0}, {initializer::kind::zeros, 0});
  check_layer(*l, {7}, 3, random_tensor({3, 7}, 1), 10);
  auto flat = make_dense("fc2", 4, {}, {});
  check_layer(*flat, {2, 2, 3}, 2, random_tensor({2, 2, 2, 3}, 2), 20); // flattens its input
}

BOOST_AUTO_TEST_CASE(conv2d_same_valid_and_strided) {
  check_conv2d(
    {conv_case{5, 5, 2, 3, 3, 1, padding::same}, conv_case{6, 5, 2, 2, 3, 1, padding::valid},
     conv_case{7, 7, 1, 2, 3, 2, padding::same}, conv_case{7, 6, 2, 2, 2, 2, padding::valid},
     conv_case{4, 4, 3, 2, 5, 1, padding::same}},
    3, 30);
}

BOOST_AUTO_TEST_CASE(conv2d_small_receptive_field_path) {
  // Filters in multiples of 8 with kh*kw*c <= 64 take the direct kernel
  // (blocks of 32, 24, 16 and 8 channels, odd output widths for the
  // one-pixel tail); its gradients are checked like every other layer's,
  // with a wider step: a convolution is linear in x and in its parameters,
  // so the central difference has no truncation error, only float rounding.
  check_conv2d(
    {conv_case{5, 5, 1, 8, 3, 1, padding::same}, conv_case{6, 5, 2, 16, 3, 1, padding::valid},
     conv_case{7, 7, 1, 40, 3, 2, padding::same}, conv_case{7, 6, 2, 24, 2, 2, padding::valid},
     conv_case{5, 5, 1, 32, 5, 1, padding::same}},
    4, 40, 0.1f);
}

BOOST_AUTO_TEST_CASE(conv2d_seed_conv1_matches_a_double_reference) {
  // The seeds' conv1 (5x5x1x32 SAME on 28x28) against a plain loop in double.
  const int64_t batch = 2, h = 28, w = 28, f = 32, k = 5;
  auto l = make_conv2d("conv1", f, k, k, 1, padding::same, {}, {});
  l->configure({h, w, 1});
  auto x = random_tensor({batch, h, w, 1}, 5);
  std::vector<tensor> params{random_tensor({k, k, 1, f}, 6), random_tensor({f}, 7)};
  tensor y;
  l->forward(x, y, params.data(), true);
  auto r = random_tensor(y.shape(), 8);
  std::vector<tensor> grads(2);
  l->backward(x, y, r, nullptr, params.data(), grads.data());
  std::vector<double> dw(k * k * f, 0.0), db(f, 0.0);
  double worst_y = 0, worst_dw = 0, worst_db = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t oy = 0; oy < h; ++oy)
      for (int64_t ox = 0; ox < w; ++ox)
        for (int64_t o = 0; o < f; ++o) {
          double acc = params[1][o];
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              auto iy = oy + ky - 2, ix = ox + kx - 2;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                acc += double(x[(b * h + iy) * w + ix]) * params[0][(ky * k + kx) * f + o];
            }
          auto at = ((b * h + oy) * w + ox) * f + o;
          worst_y = std::max(worst_y, std::fabs(acc - y[at]));
          db[o] += r[at];
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              auto iy = oy + ky - 2, ix = ox + kx - 2;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                dw[(ky * k + kx) * f + o] += double(x[(b * h + iy) * w + ix]) * r[at];
            }
        }
  for (size_t i = 0; i < dw.size(); ++i)
    worst_dw = std::max(worst_dw, std::fabs(dw[i] - grads[0][i]));
  for (int64_t o = 0; o < f; ++o)
    worst_db = std::max(worst_db, std::fabs(db[o] - grads[1][o]));
  BOOST_TEST(worst_y < 1e-5);
  BOOST_TEST(worst_dw < 1e-3); // sums of ~1500 products of magnitude <= 1
  BOOST_TEST(worst_db < 1e-3);
}

BOOST_AUTO_TEST_CASE(conv2d_matches_a_direct_convolution) {
  // 3x3 input, one channel, 2x2 kernel of ones, VALID: each output is a 2x2 sum.
  auto l = make_conv2d("conv", 1, 2, 2, 1, padding::valid, {}, {});
  l->configure({3, 3, 1});
  tensor x({1, 3, 3, 1}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::vector<tensor> params{tensor({2, 2, 1, 1}, 1.0f), tensor({1}, 0.5f)};
  tensor y;
  l->forward(x, y, params.data(), false);
  BOOST_TEST(y.values() == (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}),
             boost::test_tools::per_element());
  // SAME with a 3x3 kernel keeps 3x3 and pads with zeros: the centre sees all 9.
  auto same = make_conv2d("same", 1, 3, 3, 1, padding::same, {}, {});
  same->configure({3, 3, 1});
  std::vector<tensor> p3{tensor({3, 3, 1, 1}, 1.0f), tensor({1}, 0.0f)};
  same->forward(x, y, p3.data(), false);
  BOOST_TEST(y.shape() == (shape_t{1, 3, 3, 1}), boost::test_tools::per_element());
  BOOST_TEST(y[4] == 45.0f);
  BOOST_TEST(y[0] == 12.0f); // 1 + 2 + 4 + 5
}

BOOST_AUTO_TEST_CASE(max_pool) {
  for (auto pad : {padding::same, padding::valid}) {
    auto l = make_max_pool("pool", 2, 2, pad);
    check_layer(*l, {5, 5, 2}, 2, spread_tensor({2, 5, 5, 2}, 4), 40);
  }
  auto l = make_max_pool("pool", 2, 2, padding::same);
  l->configure({2, 2, 1});
  tensor x({1, 2, 2, 1}, std::vector<float>{1, 7, 3, 5}), y;
  l->forward(x, y, nullptr, false);
  BOOST_TEST(y.size() == 1u);
  BOOST_TEST(y[0] == 7.0f);
}

BOOST_AUTO_TEST_CASE(max_pool_tiled_path_and_fused_relu) {
  // 2x2 / stride 2 on even sizes takes the tiled path (8 channels at a time
  // plus a scalar tail for channels 8 and 9).
  auto tiled = make_max_pool("pool", 2, 2, padding::same);
  check_layer(*tiled, {4, 6, 10}, 2, spread_tensor({2, 4, 6, 10}, 5), 50);
  // A pool that applies the ReLU before it must equal relu then pool, values
  // and gradients, including windows with no positive value.
  for (auto pad : {padding::same, padding::valid}) {
    for (shape_t in : {shape_t{4, 6, 10}, shape_t{5, 5, 3}}) {
      auto relu = make_relu("relu");
      auto plain = make_max_pool("plain", 2, 2, pad);
      auto fused = make_max_pool("fused", 2, 2, pad);
      relu->configure(in);
      plain->configure(in);
      fused->configure(in);
      BOOST_REQUIRE(fused->fuse_input_relu());
      auto x = spread_tensor(with_batch(2, in), 6);
      tensor r, y_plain, y_fused, dr, dx_plain, dx_fused;
      relu->forward(x, r, nullptr, true);
      plain->forward(r, y_plain, nullptr, true);
      fused->forward(x, y_fused, nullptr, true);
      BOOST_TEST(y_fused.values() == y_plain.values(), boost::test_tools::per_element());
      auto dy = random_tensor(y_plain.shape(), 7);
      plain->backward(r, y_plain, dy, &dr, nullptr, nullptr);
      relu->backward(x, r, dr, &dx_plain, nullptr, nullptr);
      fused->backward(x, y_fused, dy, &dx_fused, nullptr, nullptr);
      BOOST_TEST(dx_fused.values() == dx_plain.values(), boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(relu) {
  auto l = make_relu("relu");
  check_layer(*l, {4, 3}, 2, spread_tensor({2, 4, 3}, 5), 50);
}

BOOST_AUTO_TEST_CASE(dropout_masks_scales_and_is_off_at_evaluation) {
  auto l = make_dropout("drop", 0.5f, 7);
  l->configure({1000});
  tensor x({4, 1000}, 1.0f), y;
  l->forward(x, y, nullptr, true);
  size_t dropped = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    BOOST_REQUIRE((y[i] == 0.0f || y[i] == 2.0f));
    dropped += y[i] == 0.0f;
  }
  BOOST_TEST(dropped > 1800u);
  BOOST_TEST(dropped < 2200u);
  auto dy = random_tensor(y.shape(), 6);
  tensor dx;
  l->backward(x, y, dy, &dx, nullptr, nullptr);
  for (size_t i = 0; i < y.size(); ++i)
    BOOST_REQUIRE(dx[i] == dy[i] * y[i]); // the same mask and scale
  l->forward(x, y, nullptr, false);
  BOOST_TEST(y.bit_equal(x));
  // Same seed, same masks: runs are reproducible.
  auto a = make_dropout("a", 0.3f, 11), b = make_dropout("b", 0.3f, 11);
  a->configure({100});
  b->configure({100});
  tensor ya, yb, x2({1, 100}, 1.0f);
  a->forward(x2, ya, nullptr, true);
  b->forward(x2, yb, nullptr, true);
  BOOST_TEST(ya.bit_equal(yb));
}

BOOST_AUTO_TEST_CASE(shapes_that_do_not_fit_are_named) {
  auto conv = make_conv2d("conv1", 4, 3, 3, 1, padding::valid, {}, {});
  BOOST_CHECK_THROW(conv->configure({10}), shape_error);
  auto big = make_conv2d("conv2", 4, 9, 9, 1, padding::valid, {}, {});
  try {
    big->configure({5, 5, 1});
    BOOST_FAIL("expected a shape error");
  } catch (const shape_error& e) {
    BOOST_TEST(std::string(e.what()).find("conv2") != std::string::npos);
  }
  BOOST_TEST(conv_output_size(28, 5, 1, padding::same) == 28);
  BOOST_TEST(conv_output_size(7, 2, 2, padding::same) == 4);
  BOOST_TEST(conv_output_size(7, 2, 2, padding::valid) == 3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(model_gradients)

// Whole models: dL/d(parameters) against finite differences of the
// evaluation loss (these models have no dropout, so both passes agree).
// Values in [-scale, scale) for each of the model's variables, then a batch
// of `shape` (examples first) in [0, 1) with labels 0..9 in turn, each
// tensor from the next seed.
struct step_inputs {
  std::vector<tensor> params;
  troupe::batch b;
};

step_inputs random_step(const model& net, float scale, shape_t shape, uint32_t seed) {
  std::vector<tensor> params;
  for (auto& v : net.variables())
    params.push_back(random_tensor(v.shape, seed++, -scale, scale));
  troupe::batch b;
  b.images = random_tensor(std::move(shape), seed++, 0.0f, 1.0f);
  for (int64_t i = 0; i < b.images.shape()[0]; ++i)
    b.labels.push_back(static_cast<int32_t>(i % 10));
  return {std::move(params), std::move(b)};
}

// The worst relative error of grads against numeric(p, i), the central
// difference for value i of variable p, over every value or an evenly spread
// sample of max_per_variable of each variable's.
template <class Numeric>
double worst_error(const std::vector<tensor>& grads, size_t max_per_variable, Numeric numeric) {
  double worst = 0;
  for (size_t p = 0; p < grads.size(); ++p) {
    size_t stride = std::max<size_t>(1, grads[p].size() / max_per_variable);
    for (size_t i = 0; i < grads[p].size(); i += stride)
      worst = std::max(worst, rel_error(numeric(p, i), grads[p][i]));
  }
  return worst;
}

// Every parameter, or an evenly spread sample of large variables.
void check_model(model& net, shape_t per_example, int64_t batch, uint32_t seed,
                 size_t max_per_variable) {
  auto in = random_step(net, 0.3f, with_batch(batch, per_example), seed);
  std::vector<tensor> grads;
  net.train_step(in.params, in.b, grads);
  const float h = 1e-3f;
  double worst = worst_error(grads, max_per_variable, [&](size_t p, size_t i) {
    auto plus = in.params, minus = in.params;
    plus[p][i] += h;
    minus[p][i] -= h;
    return (net.evaluate(plus, in.b).loss - net.evaluate(minus, in.b).loss) / (2.0 * h);
  });
  BOOST_TEST(worst < 1e-3, net.name() << ": worst relative error " << worst);
}

// A double-precision reference of a stack of dense layers with ReLU between
// them (softmax regression, the MLP) and its mean softmax cross-entropy.
double reference_loss(const std::vector<std::vector<double>>& params, const troupe::batch& b,
                      int64_t features) {
  double total = 0;
  for (size_t r = 0; r < b.size(); ++r) {
    std::vector<double> act(b.images.data() + r * features, b.images.data() + (r + 1) * features);
    for (size_t l = 0; l < params.size(); l += 2) {
      auto out = params[l + 1].size();
      std::vector<double> next(params[l + 1]);
      for (size_t i = 0; i < act.size(); ++i)
        for (size_t o = 0; o < out; ++o)
          next[o] += act[i] * params[l][i * out + o];
      if (l + 2 < params.size())
        for (auto& v : next)
          v = std::max(v, 0.0);
      act = std::move(next);
    }
    double mx = *std::max_element(act.begin(), act.end()), sum = 0;
    for (auto v : act)
      sum += std::exp(v - mx);
    total += std::log(sum) + mx - act[b.labels[r]];
  }
  return total / static_cast<double>(b.size());
}

void check_dense_stack(model& net, int64_t batch, uint32_t seed, size_t max_per_variable) {
  auto in = random_step(net, 0.1f, {batch, 784}, seed);
  std::vector<std::vector<double>> exact;
  for (auto& p : in.params)
    exact.emplace_back(p.values().begin(), p.values().end());
  std::vector<tensor> grads;
  net.train_step(in.params, in.b, grads);
  const double h = 1e-5;
  double worst = worst_error(grads, max_per_variable, [&](size_t p, size_t i) {
    auto keep = exact[p][i];
    exact[p][i] = keep + h;
    double up = reference_loss(exact, in.b, 784);
    exact[p][i] = keep - h;
    double down = reference_loss(exact, in.b, 784);
    exact[p][i] = keep;
    return (up - down) / (2 * h);
  });
  BOOST_TEST(worst < 1e-3, net.name() << ": worst relative error " << worst);
}

BOOST_AUTO_TEST_CASE(softmax_and_mlp_against_a_double_reference) {
  check_dense_stack(*make_model(model_kind::softmax), 5, 100, 80);
  check_dense_stack(*make_model(model_kind::mlp), 4, 200, 30);
}

BOOST_AUTO_TEST_CASE(a_small_cnn_built_like_deepnn) {
  model_options o;
  o.input = {8, 8, 2};
  o.layers = {"conv2d name=conv1 filters=3 kernel=3 padding=same",
              "relu",
              "max_pool size=2",
              "conv2d name=conv2 filters=4 kernel=3 padding=same",
              "relu",
              "max_pool size=2",
              "flatten",
              "dense name=fc1 units=6",
              "relu",
              "dense name=fc2 units=10"};
  check_model(*make_model(model_kind::custom, o), {8, 8, 2}, 3, 300, 1000);
}

BOOST_AUTO_TEST_SUITE_END()
