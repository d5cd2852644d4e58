#define BOOST_TEST_MODULE gpu_backend
// The device interface, and the CUDA backend against the CPU one: every
// layer forward and backward on random inputs of several shapes, softmax
// cross-entropy, and one full training step of each built-in model. Without
// a CUDA device (CI, development machines) the parity tests are skipped with
// a message saying so; the rest runs everywhere.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include <boost/test/unit_test.hpp>

#include "gpu/backend.hpp"
#include "gpu/parity.hpp"
#include "tensor/core/error.hpp"
#include "tensor/nn/layers.hpp"
#include "tensor/nn/loss.hpp"
#include "tensor/optim/optimizer.hpp"
#include "tests/support/tensors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

const gpu::device_spec cuda0{gpu::device_spec::kind::cuda, 0};

// Boost.Test precondition: the parity tests need a device.
struct has_cuda_device {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    if (gpu::cuda_device_count() > 0)
      return true;
    static bool said = false;
    if (!said) {
      std::cout << "gpu_tests: SKIPPED the GPU parity tests: "
                << (gpu::built_with_cuda() ? "no CUDA device is visible on this machine"
                                           : "this build has no CUDA backend")
                << " (run them on a GPU machine)" << std::endl;
      said = true;
    }
    boost::test_tools::assertion_result r(false);
    r.message() << "no CUDA device";
    return r;
  }
};

layer_desc configured(layer& l, const shape_t& input) {
  auto output = l.configure(input);
  auto d = l.desc();
  d.name = l.name();
  d.input = input;
  d.output = output;
  d.num_variables = l.variables().size();
  return d;
}

// Runs `l` on the CPU and on the device with the same inputs, parameters and
// upstream gradient, and checks y, dx and every gradient within `bound`.
void check_parity(layer& l, const shape_t& input, int64_t batch, double bound, uint32_t seed = 1) {
  auto d = configured(l, input);
  std::vector<tensor> params;
  for (auto& v : l.variables())
    params.push_back(random_tensor(v.shape, seed++, -0.5f, 0.5f));
  auto x = random_tensor(with_batch(batch, input), seed++);
  tensor y;
  l.forward(x, y, params.data(), true);
  auto dy = random_tensor(y.shape(), seed++);
  tensor dx;
  std::vector<tensor> grads(params.size());
  l.backward(x, y, dy, &dx, params.data(), grads.data());
  auto gpu = gpu::run_layer_on_device(d, x, params, dy, true, cuda0);
  auto what = l.name() + " (" + l.describe() + ")";
  BOOST_TEST(relative_error(gpu.y, y) <= bound, what << " forward");
  BOOST_TEST(relative_error(gpu.dx, dx) <= bound, what << " input gradient");
  BOOST_REQUIRE(gpu.grads.size() == grads.size());
  for (size_t i = 0; i < grads.size(); ++i)
    BOOST_TEST(relative_error(gpu.grads[i], grads[i]) <= bound, what << " gradient " << i);
}

// n random images (the same for the same seed), labels 0..9 in turn.
batch image_batch(int64_t n, uint32_t seed) {
  batch b;
  b.images = random_tensor({n, 784}, seed, 0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i)
    b.labels.push_back(static_cast<int32_t>(i % 10));
  return b;
}

// Every variable's initial value, seed 42.
std::vector<tensor> initial_params(const model& m) {
  return initial_values(m, 42);
}

} // namespace

BOOST_AUTO_TEST_SUITE(device_interface)

BOOST_AUTO_TEST_CASE(device_names_parse) {
  BOOST_TEST((gpu::parse_device("cpu").type == gpu::device_spec::kind::cpu));
  auto d = gpu::parse_device("cuda:3");
  BOOST_TEST((d.type == gpu::device_spec::kind::cuda && d.index == 3));
  BOOST_TEST(d.to_string() == "cuda:3");
  for (auto bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"})
    BOOST_CHECK_THROW(gpu::parse_device(bad), troupe_error);
}

BOOST_AUTO_TEST_CASE(a_cpu_device_computes_with_the_cpu_model) {
  auto cpu = make_model(model_kind::mlp);
  auto* raw = cpu.get();
  auto same = gpu::make_device_model(std::move(cpu), gpu::parse_device("cpu"));
  BOOST_TEST(same.get() == raw);
  BOOST_TEST(gpu::describe_device(gpu::parse_device("cpu")) == "cpu");
  BOOST_TEST(same->staging() == nullptr);
  BOOST_CHECK_THROW(same->train_step_staged(batch{}), troupe_error);
  BOOST_CHECK_THROW(gpu::check_device(gpu::parse_device("cpu"), {1.5}), troupe_error);
}

// Without a device asking for one is a clear error naming it, never a crash.
BOOST_AUTO_TEST_CASE(a_missing_device_is_a_clear_error) {
  if (gpu::cuda_device_count() > 0) {
    BOOST_TEST_MESSAGE("a CUDA device is present; the no-device check does not apply");
    return;
  }
  auto expect_clear_error = [](const gpu::device_spec& device, auto&& call) {
    try {
      call();
      BOOST_FAIL("expected an error");
    } catch (const troupe_error& e) {
      std::string msg = e.what();
      BOOST_TEST(msg.find(device.to_string()) != std::string::npos, msg);
      BOOST_TEST(msg.find("device = cpu") != std::string::npos, msg);
    }
  };
  for (auto device : {cuda0, gpu::device_spec{gpu::device_spec::kind::cuda, 5}}) {
    expect_clear_error(device,
                       [&] { gpu::make_device_model(make_model(model_kind::softmax), device); });
    expect_clear_error(device, [&] { gpu::describe_device(device); });
  }
}

BOOST_AUTO_TEST_CASE(layers_describe_themselves_to_other_backends) {
  auto net = make_model(model_kind::cnn);
  auto layers = net->layers();
  BOOST_REQUIRE(layers.size() == 11u);
  BOOST_TEST((layers[0].type == layer_desc::kind::conv2d));
  BOOST_TEST(layers[0].filters == 32);
  BOOST_TEST(layers[0].output == (shape_t{28, 28, 32}), boost::test_tools::per_element());
  BOOST_TEST(layers[1].skipped); // conv1/relu, applied by pool1
  BOOST_TEST(layers[2].applies_input_relu);
  BOOST_TEST(layers[6].skipped);              // flatten
  BOOST_TEST(layers[7].first_variable == 4u); // fc1/weights
  BOOST_TEST(layers[7].num_variables == 2u);
  BOOST_TEST(layers[9].rate == 0.5f);
}

BOOST_AUTO_TEST_SUITE_END()

// Bounds: layers built on GEMM (dense, conv2d) differ from the CPU only in
// summation order: relative error <= 1e-5 (cuBLAS in full FP32, no TF32).
// Element-wise layers, pooling and dropout compute the same float
// operations: <= 1e-6.
BOOST_AUTO_TEST_SUITE(cuda_parity, *boost::unit_test::precondition(has_cuda_device{}))

BOOST_AUTO_TEST_CASE(dense_layers) {
  for (auto [in, units, batch] :
       {std::tuple{7, 5, 3}, std::tuple{784, 256, 33}, std::tuple{3136, 1024, 100}}) {
    auto l = make_dense("fc", units, {}, {});
    check_parity(*l, {in}, batch, 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(conv2d_layers) {
  struct c {
    int64_t h, w, ch, filters, k, stride;
    padding pad;
    int64_t batch;
  };
  for (auto p : {c{5, 5, 2, 3, 3, 1, padding::same, 2}, c{6, 5, 2, 2, 3, 1, padding::valid, 3},
                 c{7, 7, 1, 2, 3, 2, padding::same, 2}, c{7, 6, 2, 2, 2, 2, padding::valid, 2},
                 c{28, 28, 1, 32, 5, 1, padding::same, 16},  // the seeds' conv1
                 c{14, 14, 32, 64, 5, 1, padding::same, 16}, // conv2
                 // 26 MB of unfolded rows per example: 48 examples take two
                 // chunks of at most 1 GiB (im2col again in the backward,
                 // the weight gradient accumulated over chunks)
                 c{64, 64, 64, 8, 5, 1, padding::same, 48}}) {
    auto l = make_conv2d("conv", p.filters, p.k, p.k, p.stride, p.pad, {}, {});
    check_parity(*l, {p.h, p.w, p.ch}, p.batch, 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(max_pool_relu_and_fused_relu) {
  for (auto pad : {padding::same, padding::valid}) {
    auto pool = make_max_pool("pool", 2, 2, pad);
    check_parity(*pool, {5, 5, 3}, 4, 1e-6);
    auto overlapping = make_max_pool("pool3", 3, 2, pad);
    check_parity(*overlapping, {7, 6, 2}, 3, 1e-6);
  }
  auto tiled = make_max_pool("pool", 2, 2, padding::same);
  BOOST_REQUIRE(tiled->fuse_input_relu());
  check_parity(*tiled, {28, 28, 32}, 4, 1e-6);
  auto relu = make_relu("relu");
  check_parity(*relu, {1024}, 16, 1e-6);
}

BOOST_AUTO_TEST_CASE(dropout_draws_the_cpu_masks) {
  for (float rate : {0.5f, 0.2f}) {
    auto l = make_dropout("dropout", rate, 1234);
    check_parity(*l, {1023}, 3, 1e-6); // odd sizes: a draw split across examples
  }
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_and_accuracy) {
  for (auto [rows, classes] : {std::pair{3, 10}, std::pair{1024, 10}, std::pair{7, 1000}}) {
    auto logits = random_tensor({rows, classes}, 9, -5.0f, 5.0f);
    std::vector<int32_t> labels;
    for (int i = 0; i < rows; ++i)
      labels.push_back(i % classes);
    tensor cpu_grad, gpu_grad;
    auto cpu = softmax_cross_entropy(logits, labels, &cpu_grad);
    double cpu_loss = cpu.loss;
    size_t gpu_correct = 0;
    double gpu_loss = gpu::softmax_cross_entropy_on_device(logits, labels, gpu_grad, gpu_correct,
                                                           cuda0);
    BOOST_TEST(std::fabs(gpu_loss - cpu_loss) <= 1e-5 * std::fabs(cpu_loss));
    BOOST_TEST(relative_error(gpu_grad, cpu_grad) <= 1e-5);
    BOOST_TEST(gpu_correct == cpu.correct);
  }
}

// One training step of each built-in model, CPU vs GPU: same parameters, same
// batch, same dropout masks; loss, accuracy and every gradient.
BOOST_AUTO_TEST_CASE(a_training_step_of_each_model) {
  for (auto kind : {model_kind::softmax, model_kind::mlp, model_kind::cnn, model_kind::vgg11}) {
    std::string name = name_of(kind);
    auto cpu = make_model(kind);
    auto gpu_model = gpu::make_device_model(make_model(kind), cuda0, {0.5});
    auto params = initial_params(*cpu);
    auto b = image_batch(32, 5);
    for (int step = 0; step < 2; ++step) { // the second step draws new masks on both
      std::vector<tensor> cpu_grads, gpu_grads;
      auto c = cpu->train_step(params, b, cpu_grads);
      auto g = gpu_model->train_step(params, b, gpu_grads);
      BOOST_TEST(std::fabs(g.loss - c.loss) <= 1e-5 * std::fabs(c.loss), name << " loss");
      BOOST_TEST(g.correct == c.correct, name);
      BOOST_TEST(g.examples == c.examples, name);
      BOOST_REQUIRE(gpu_grads.size() == cpu_grads.size());
      // The norm from the device's reduction, as clipping and the finiteness
      // check use it.
      BOOST_TEST(std::fabs(g.gradient_norm - global_norm(cpu_grads))
                   <= 1e-4 * global_norm(cpu_grads),
                 name << " gradient norm");
      BOOST_TEST(c.gradient_norm == -1.0);
      for (size_t v = 0; v < cpu_grads.size(); ++v)
        BOOST_TEST(relative_error(gpu_grads[v], cpu_grads[v]) <= 1e-4,
                   name << " " << cpu->variables()[v].name << " step " << step);
    }
    auto ce = cpu->evaluate(params, b), ge = gpu_model->evaluate(params, b);
    BOOST_TEST(std::fabs(ge.loss - ce.loss) <= 1e-5 * std::fabs(ce.loss), name << " evaluate");
  }
}

// A caller that writes parameters into the model's pinned staging and reads
// gradients from it gets the step the tensor interface computes.
BOOST_AUTO_TEST_CASE(the_staged_step_matches_the_tensor_step) {
  auto by_tensors = gpu::make_device_model(make_model(model_kind::cnn), cuda0, {0.2});
  auto staged = gpu::make_device_model(make_model(model_kind::cnn), cuda0, {0.2});
  auto* buffers = staged->staging();
  BOOST_REQUIRE(buffers != nullptr);
  auto& vars = staged->variables();
  BOOST_REQUIRE(buffers->params.size() == vars.size());
  BOOST_REQUIRE(buffers->grads.size() == vars.size());
  auto params = initial_params(*staged);
  auto b = image_batch(16, 9);
  for (int step = 0; step < 2; ++step) { // the buffers are reused; dropout draws anew
    for (size_t v = 0; v < vars.size(); ++v)
      std::copy(params[v].values().begin(), params[v].values().end(), buffers->params[v]);
    std::vector<tensor> grads;
    auto t = by_tensors->train_step(params, b, grads);
    auto s = staged->train_step_staged(b);
    BOOST_TEST(std::fabs(s.loss - t.loss) <= 1e-6 * std::fabs(t.loss));
    BOOST_TEST(s.correct == t.correct);
    BOOST_TEST(std::fabs(s.gradient_norm - t.gradient_norm) <= 1e-6 * t.gradient_norm);
    for (size_t v = 0; v < vars.size(); ++v)
      BOOST_TEST(relative_error(buffers->grads[v], grads[v]) <= 1e-6,
                 vars[v].name << " step " << step);
    for (auto& p : params) // a different point for the next step
      for (auto& x : p.values())
        x *= 0.9f;
  }
}

BOOST_AUTO_TEST_CASE(the_device_describes_itself) {
  auto text = gpu::describe_device(cuda0);
  BOOST_TEST(text.rfind("cuda:0 (", 0) == 0u, text);
  BOOST_TEST(text.find(", sm_") != std::string::npos, text);
  BOOST_TEST(text.find(" MB)") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(memory_fraction_is_enforced) {
  // 0.1% of the device (80 MB on an H100, 141 MB on an H200) holds the CNN's
  // parameters and gradients (26 MB) but not its activations at batch 4096
  // (conv1's output alone is 411 MB): that step fails with an error naming
  // the setting, and the model still trains a small batch afterwards.
  auto net = gpu::make_device_model(make_model(model_kind::cnn), cuda0, {0.001});
  auto params = initial_params(*net);
  std::vector<tensor> grads;
  try {
    net->train_step(params, image_batch(4096, 3), grads);
    BOOST_FAIL("expected an out-of-share error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("gpu-memory-fraction") != std::string::npos, e.what());
  }
  auto stats = net->train_step(params, image_batch(8, 3), grads);
  BOOST_TEST(std::isfinite(stats.loss));
  BOOST_TEST(stats.examples == 8u);
  BOOST_TEST(std::isfinite(stats.gradient_norm));
}

BOOST_AUTO_TEST_SUITE_END()

#if defined(TROUPE_CUDA_EMULATION)
// Only on the emulated device (gpu_emulated_tests), whose free memory a test
// can change while a model lives.
BOOST_AUTO_TEST_SUITE(emulated_device)

// Two workers whose shares add up to more than the device pass the check at
// start (the pool grows lazily); the one that finds the device full says so,
// naming the setting, and trains again once there is room.
BOOST_AUTO_TEST_CASE(a_device_others_filled_since_the_start_is_a_clear_error) {
  auto net = gpu::make_device_model(make_model(model_kind::cnn), cuda0, {0.5});
  auto params = initial_params(*net);
  auto b = image_batch(8, 3);
  std::vector<tensor> grads;
  ::setenv("TROUPE_EMULATED_CUDA_BUSY_MB", "81900", 1); // 20 MB of 80 GiB left
  try {
    net->train_step(params, b, grads);
    BOOST_FAIL("expected an out-of-memory error");
  } catch (const troupe_error& e) {
    std::string msg = e.what();
    BOOST_TEST(msg.find("other workers or processes on the device") != std::string::npos, msg);
    BOOST_TEST(msg.find("train.gpu-memory-fraction") != std::string::npos, msg);
  }
  ::unsetenv("TROUPE_EMULATED_CUDA_BUSY_MB");
  auto stats = net->train_step(params, b, grads);
  BOOST_TEST(std::isfinite(stats.loss));
}

BOOST_AUTO_TEST_SUITE_END()
#endif
