#pragma once
// A process's metrics in Prometheus's text format: counters, gauges and
// histograms that the actors update (atomics, no lock on the hot path) and
// that the metrics endpoint renders at each scrape. A metric is created once,
// by name and labels, and lives as long as the registry: callers keep the
// reference. No CAF, no HTTP.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace troupe::metrics {

/// Label names and values, in the order they are written.
using label_set = std::vector<std::pair<std::string, std::string>>;

/// Only ever goes up (a `_total`).
class counter {
public:
  void add(uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<uint64_t> value_{0};
};

/// A value now: set, or moved by a difference.
class gauge {
public:
  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept;
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> value_{0.0};
};

/// Observations counted in cumulative buckets by upper bound (`le`), with
/// their count and sum.
class histogram {
public:
  explicit histogram(std::vector<double> upper_bounds);
  void observe(double v) noexcept;

  struct snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative; // one per bound, then +Inf
    double sum = 0;
  };
  snapshot read() const;

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_; // bounds_.size() + 1 (+Inf)
  gauge sum_;
};

/// Request latencies: 100 us to 10 s.
std::vector<double> latency_buckets();

class registry {
public:
  /// The metric of that name and labels, created on first use. The same name
  /// must keep its kind (and help): a second kind throws std::logic_error.
  counter& get_counter(const std::string& name, const std::string& help, label_set labels = {});
  gauge& get_gauge(const std::string& name, const std::string& help, label_set labels = {});
  histogram& get_histogram(const std::string& name, const std::string& help,
                           std::vector<double> upper_bounds, label_set labels = {});
  /// A gauge whose value is read at each scrape (must be thread-safe and
  /// cheap: a /proc read, an atomic). Replaces one of the same name and labels.
  void set_callback_gauge(const std::string& name, const std::string& help,
                          std::function<double()> read, label_set labels = {});

  /// The gauges of that name now, by labels (none: no such gauge).
  std::vector<std::pair<label_set, double>> gauge_values(const std::string& name) const;

  /// Every metric in Prometheus's text exposition format (0.0.4), families in
  /// name order.
  std::string render() const;

private:
  enum class kind { counter, gauge, histogram };
  struct family {
    kind what;
    std::string help;
    std::map<label_set, std::unique_ptr<counter>> counters;
    std::map<label_set, std::unique_ptr<gauge>> gauges;
    std::map<label_set, std::unique_ptr<histogram>> histograms;
    std::map<label_set, std::function<double()>> callbacks;
  };
  family& family_of(const std::string& name, const std::string& help, kind what);
  /// The metric of `labels` in `slots`, made by `make` the first time.
  template <class Metric, class Make>
  Metric& slot(std::map<label_set, std::unique_ptr<Metric>>& slots, label_set labels, Make make);

  mutable std::mutex mutex_;
  std::map<std::string, family> families_;
};

/// The process's registry: the one the metrics endpoint serves.
registry& process_registry();

/// A name Prometheus accepts ([a-zA-Z_:][a-zA-Z0-9_:]*).
bool valid_metric_name(const std::string& name);

} // namespace troupe::metrics
