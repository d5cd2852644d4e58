// bench/optimizer: one shard update of the CNN's fc1/weights (3,211,264
// values) with Adam, the median of 20, in three states:
//   - moments in the normal range, through optimizer::apply (the product);
//   - moments decayed below 1.2e-38 (what a few hundred zero-gradient steps
//     leave: a third of fc1's first moments in a CNN run), the same
//     arithmetic with IEEE denormals, as shards computed before they flushed;
//   - the same denormal moments under flush_denormals, the product's mode.
// The ratio of the last two is what flushing buys a shard on this CPU.
//   build/bin/troupe-bench-optimizer
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tensor/core/flush_denormals.hpp"
#include "tensor/optim/optimizer.hpp"

using namespace troupe;

namespace {

constexpr size_t values = 3136 * 1024;
constexpr int reps = 20;

template <class F>
double median_ms(F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

// TF's ApplyAdam as optimizer.cpp writes it, on moments given here. The
// moments are reset before each call so that every call starts denormal.
struct adam_loop {
  std::vector<float> var = std::vector<float>(values, 0.1f),
                     grad = std::vector<float>(values, 0.0f), m, v;
  float start;
  explicit adam_loop(float moment) : start(moment) {}
  void operator()() {
    m.assign(values, start);
    v.assign(values, start);
    const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
    for (size_t i = 0; i < values; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * grad[i];
      v[i] = b2 * v[i] + (1.0f - b2) * grad[i] * grad[i];
      var[i] -= lr * m[i] / (std::sqrt(v[i]) + eps);
    }
  }
};

} // namespace

int main() {
  optimizer_config c;
  c.kind = optimizer_kind::adam;
  c.learning_rate.base = 1e-3;
  auto opt = make_optimizer(c);
  tensor var({3136, 1024}, 0.1f), grad({3136, 1024}, 1e-3f);
  int64_t step = 0;
  double product = median_ms([&] { opt->apply("fc1/weights", var, grad, step++); });
  adam_loop ieee(1e-39f), flushed(1e-39f);
  double denormal = median_ms(ieee);
  double flush = median_ms([&] {
    flush_denormals arithmetic;
    flushed();
  });
  std::printf("bench/optimizer: Adam over %zu values (the CNN's fc1/weights), median of %d\n",
              values, reps);
  std::printf("  moments normal, optimizer::apply      %8.2f ms\n", product);
  std::printf("  moments denormal, IEEE (before)        %8.2f ms\n", denormal);
  std::printf("  moments denormal, flushed (now)        %8.2f ms   %.2fx faster than IEEE\n", flush,
              denormal / flush);
  return 0;
}
