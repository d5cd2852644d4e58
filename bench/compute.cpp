// bench/compute: one training step (forward, backward, gradients) of the
// built-in models at batch 100, beside Eigen's SGEMM rate (1024^3) measured in
// the same run; the CNN's achieved GFLOP/s as a fraction of that rate. Runs
// on 1 thread and on 2 threads at once (two workers sharing this machine's 2
// cores, as in a cluster), each thread with its own model.
//   build/bin/troupe-bench-compute [--steps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>

#include "tensor/nn/model.hpp"

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds(clock_type::time_point since) {
  return std::chrono::duration<double>(clock_type::now() - since).count();
}

// Median seconds per call of f over `reps` calls after one warm-up call.
template <class F>
double median_seconds(int reps, F f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = clock_type::now();
    f();
    t.push_back(seconds(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Runs f on `threads` threads at once and returns the median per-call time
// seen by thread 0 (all threads do the same work).
template <class Make>
double concurrent_median(int threads, Make make, int reps) {
  std::vector<double> result(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto f = make(t);
      result[t] = median_seconds(reps, f);
    });
  for (auto& th : pool)
    th.join();
  return *std::max_element(result.begin(), result.end());
}

// Seconds per 1024^3 SGEMM on each of `threads` threads at once (median of
// `reps` calls).
double gemm_seconds(int threads, int reps) {
  const int n = 1024;
  return concurrent_median(
    threads,
    [&](int) {
      auto a = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Random(n, n));
      auto b = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Random(n, n));
      auto c = std::make_shared<Eigen::MatrixXf>(n, n);
      return [a, b, c] { c->noalias() = (*a) * (*b); };
    },
    reps);
}

// Multiply-adds x2 of one CNN training step per example: forward of every
// layer, backward for weights of every layer and for inputs of all but conv1.
double cnn_flops_per_example() {
  double conv1 = 2.0 * 28 * 28 * 5 * 5 * 1 * 32;
  double conv2 = 2.0 * 14 * 14 * 5 * 5 * 32 * 64;
  double fc1 = 2.0 * 3136 * 1024;
  double fc2 = 2.0 * 1024 * 10;
  return 2 * conv1 + 3 * (conv2 + fc1 + fc2);
}

struct step_setup {
  std::unique_ptr<model> net;
  std::vector<tensor> params, grads;
  batch b;
};

std::shared_ptr<step_setup> make_step(model_kind kind, int64_t batch_size, uint32_t seed) {
  auto s = std::make_shared<step_setup>();
  s->net = make_model(kind);
  s->params = initial_values(*s->net, seed);
  s->b.images = tensor({batch_size, 784});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (size_t i = 0; i < s->b.images.size(); ++i)
    s->b.images[i] = u(rng);
  for (int64_t i = 0; i < batch_size; ++i)
    s->b.labels.push_back(static_cast<int32_t>(i % 10));
  return s;
}

} // namespace

int main(int argc, char** argv) {
  int reps = 10; // softmax and mlp steps per measurement
  if (argc == 3 && std::strcmp(argv[1], "--steps") == 0)
    reps = std::max(3, std::atoi(argv[2]));
  const int64_t batch_size = 100;
  std::printf("bench/compute: one training step at batch %lld, median of %d, Eigen %d.%d.%d\n",
              static_cast<long long>(batch_size), reps, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
              EIGEN_MINOR_VERSION);
  // This machine is a VM whose speed drifts by +-20% from minute to minute,
  // so the CNN and the GEMM are measured in alternating rounds, each ratio
  // from one round, and the median ratio is reported.
  const int rounds = 7;
  for (int threads : {1, 2}) {
    std::printf("\n%d thread(s), each with its own model\n", threads);
    std::printf("  %-8s %12s %14s %12s\n", "model", "ms/step", "examples/s", "GFLOP/s");
    for (auto kind : {model_kind::softmax, model_kind::mlp}) {
      double secs = concurrent_median(
        threads,
        [&](int t) {
          auto s = make_step(kind, batch_size, 42 + t);
          return [s] { s->net->train_step(s->params, s->b, s->grads); };
        },
        reps);
      std::printf("  %-8s %12.2f %14.0f\n", name_of(kind), secs * 1e3, threads * batch_size / secs);
    }
    std::vector<double> cnn_secs, gemm_rates, ratios;
    for (int round = 0; round < rounds; ++round) {
      double secs = concurrent_median(
        threads,
        [&](int t) {
          auto s = make_step(model_kind::cnn, batch_size, 42 + t);
          return [s] { s->net->train_step(s->params, s->b, s->grads); };
        },
        3);
      double gemm = threads * 2.0 * 1024 * 1024 * 1024 / gemm_seconds(threads, 3) / 1e9;
      double cnn = threads * batch_size * cnn_flops_per_example() / secs / 1e9;
      cnn_secs.push_back(secs);
      gemm_rates.push_back(gemm);
      ratios.push_back(cnn / gemm);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double secs = median(cnn_secs), gemm = median(gemm_rates);
    std::printf("  %-8s %12.1f %14.0f %12.1f  (%.1f MFLOP/example)\n", "cnn", secs * 1e3,
                threads * batch_size / secs,
                threads * batch_size * cnn_flops_per_example() / secs / 1e9,
                cnn_flops_per_example() / 1e6);
    std::printf("  SGEMM 1024^3: %.1f GFLOP/s in total (median of %d rounds)\n", gemm, rounds);
    std::printf("  CNN / SGEMM: %.0f%% (median of the %d per-round ratios; range %.0f%%-%.0f%%)\n",
                100.0 * median(ratios), rounds,
                100.0 * *std::min_element(ratios.begin(), ratios.end()),
                100.0 * *std::max_element(ratios.begin(), ratios.end()));
  }
  return 0;
}
