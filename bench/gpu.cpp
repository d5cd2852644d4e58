// bench/gpu: the time of one training step of the seeds' CNN on a GPU worker's
// model (parameters up from host memory, forward, backward, gradients down to
// host memory; the call returns with the device synchronised), at batch 100
// and 1024: the median of many steps after a warm-up, two ways:
//   staged: parameters read from and gradients left in the model's pinned
//     buffers (model::staging), as a GPU worker uses them, and as PyTorch's
//     baseline copies from and to pinned host tensors: the same work;
//   tensors: parameters and gradients as host tensors, through the same
//     buffers, which adds a host copy of each (13.1 MB) per step.
// bench/gpu runs it beside the same step in PyTorch eager. One line per batch:
//   troupe batch=B staged_ms=M p10_ms=A p90_ms=Z tensors_ms=T
//   build/bin/troupe-bench-gpu [--steps N] [--device cuda:N] [--batch B]
// (--batch times that batch size alone: bench/gpu-profile runs it under ncu)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "tensor/core/error.hpp"

using namespace troupe;
using clock_type = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int steps = 200;
  std::string device_name = "cuda:0";
  std::vector<int64_t> batch_sizes = {100, 1024};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0)
      steps = std::max(10, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--device") == 0)
      device_name = argv[i + 1];
    else if (std::strcmp(argv[i], "--batch") == 0)
      batch_sizes = {std::max<int64_t>(1, std::atoll(argv[i + 1]))};
  }
  try {
    auto device = gpu::parse_device(device_name);
    gpu::check_device(device, {0.5});
    for (int64_t batch_size : batch_sizes) {
      auto net = gpu::make_device_model(make_model(model_kind::cnn), device, {0.5});
      auto params = initial_values(*net, 42);
      std::vector<tensor> grads;
      batch b;
      b.images = tensor({batch_size, 784});
      std::mt19937 rng(1);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (size_t i = 0; i < b.images.size(); ++i)
        b.images[i] = u(rng);
      for (int64_t i = 0; i < batch_size; ++i)
        b.labels.push_back(static_cast<int32_t>(i % 10));
      auto time_steps = [&](auto&& step) {
        for (int i = 0; i < 20; ++i) // warm-up: buffers, cuBLAS heuristics, clocks
          step();
        std::vector<double> ms;
        for (int i = 0; i < steps; ++i) {
          auto start = clock_type::now();
          step();
          ms.push_back(
            std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
        }
        std::sort(ms.begin(), ms.end());
        return ms;
      };
      auto* staging = net->staging();
      for (size_t v = 0; v < params.size(); ++v)
        std::copy(params[v].values().begin(), params[v].values().end(), staging->params[v]);
      auto staged = time_steps([&] { net->train_step_staged(b); });
      auto with_tensors = time_steps([&] { net->train_step(params, b, grads); });
      std::printf("troupe batch=%lld staged_ms=%.4f p10_ms=%.4f p90_ms=%.4f tensors_ms=%.4f\n",
                  static_cast<long long>(batch_size), staged[staged.size() / 2],
                  staged[staged.size() / 10], staged[staged.size() * 9 / 10],
                  with_tensors[with_tensors.size() / 2]);
    }
  } catch (const troupe_error& e) {
    std::fprintf(stderr, "troupe-bench-gpu: %s\n", e.what());
    return 2;
  }
  return 0;
}
