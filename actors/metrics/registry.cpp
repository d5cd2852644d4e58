#include "actors/metrics/registry.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace troupe::metrics {

void gauge::add(double d) noexcept {
  double now = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(now, now + d, std::memory_order_relaxed))
    ;
}

histogram::histogram(std::vector<double> upper_bounds)
  : bounds_(std::move(upper_bounds)),
    buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  for (size_t i = 1; i < bounds_.size(); ++i)
    if (!(bounds_[i - 1] < bounds_[i]))
      throw std::logic_error("histogram bounds must increase");
}

void histogram::observe(double v) noexcept {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.add(v);
}

histogram::snapshot histogram::read() const {
  snapshot out;
  out.upper_bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out.cumulative.push_back(running);
  }
  out.sum = sum_.value();
  return out;
}

std::vector<double> latency_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

bool valid_metric_name(const std::string& name) {
  if (name.empty())
    return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9'))
      return false;
  }
  return true;
}

registry::family& registry::family_of(const std::string& name, const std::string& help, kind what) {
  if (!valid_metric_name(name))
    throw std::logic_error("not a Prometheus metric name: " + name);
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    it->second.what = what;
    it->second.help = help;
  } else if (it->second.what != what) {
    throw std::logic_error("metric " + name + " registered twice with different kinds");
  }
  return it->second;
}

template <class Metric, class Make>
Metric& registry::slot(std::map<label_set, std::unique_ptr<Metric>>& slots, label_set labels,
                       Make make) {
  auto& held = slots[std::move(labels)];
  if (!held)
    held = make();
  return *held;
}

counter& registry::get_counter(const std::string& name, const std::string& help, label_set labels) {
  std::lock_guard<std::mutex> guard{mutex_};
  return slot(family_of(name, help, kind::counter).counters, std::move(labels),
              [] { return std::make_unique<counter>(); });
}

gauge& registry::get_gauge(const std::string& name, const std::string& help, label_set labels) {
  std::lock_guard<std::mutex> guard{mutex_};
  return slot(family_of(name, help, kind::gauge).gauges, std::move(labels),
              [] { return std::make_unique<gauge>(); });
}

histogram& registry::get_histogram(const std::string& name, const std::string& help,
                                   std::vector<double> upper_bounds, label_set labels) {
  std::lock_guard<std::mutex> guard{mutex_};
  return slot(family_of(name, help, kind::histogram).histograms, std::move(labels),
              [&] { return std::make_unique<histogram>(std::move(upper_bounds)); });
}

void registry::set_callback_gauge(const std::string& name, const std::string& help,
                                  std::function<double()> read, label_set labels) {
  std::lock_guard<std::mutex> guard{mutex_};
  family_of(name, help, kind::gauge).callbacks[std::move(labels)] = std::move(read);
}

namespace {

std::string number(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  // The shortest of 15 or 17 digits that reads back as v: 0.1, not 0.10000000000000001.
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", v);
  if (std::strtod(text, nullptr) != v)
    std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// {a="1",b="2"}, with `extra` (a histogram's le) last; empty for no labels.
std::string braces(const label_set& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty())
    return {};
  std::string out = "{";
  for (auto& [name, value] : labels) {
    if (out.size() > 1)
      out += ',';
    out += name + "=\"" + escaped(value) + '"';
  }
  if (!extra.empty())
    out += (out.size() > 1 ? "," : "") + extra;
  return out + '}';
}

void write_help(std::string& out, const std::string& name, const std::string& help,
                const char* type) {
  std::string line;
  for (char c : help)
    line += c == '\n' ? std::string{"\\n"} : c == '\\' ? std::string{"\\\\"} : std::string(1, c);
  out += "# HELP " + name + ' ' + line + '\n';
  out += "# TYPE " + name + ' ' + type + '\n';
}

} // namespace

std::vector<std::pair<label_set, double>> registry::gauge_values(const std::string& name) const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::vector<std::pair<label_set, double>> out;
  auto it = families_.find(name);
  if (it == families_.end())
    return out;
  for (auto& [labels, g] : it->second.gauges)
    out.emplace_back(labels, g->value());
  for (auto& [labels, read] : it->second.callbacks)
    out.emplace_back(labels, read());
  return out;
}

std::string registry::render() const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::string out;
  for (auto& [name, f] : families_) {
    switch (f.what) {
      case kind::counter:
        write_help(out, name, f.help, "counter");
        for (auto& [labels, c] : f.counters)
          out += name + braces(labels) + ' ' + std::to_string(c->value()) + '\n';
        break;
      case kind::gauge:
        write_help(out, name, f.help, "gauge");
        for (auto& [labels, g] : f.gauges)
          out += name + braces(labels) + ' ' + number(g->value()) + '\n';
        for (auto& [labels, read] : f.callbacks)
          out += name + braces(labels) + ' ' + number(read()) + '\n';
        break;
      case kind::histogram:
        write_help(out, name, f.help, "histogram");
        for (auto& [labels, h] : f.histograms) {
          auto s = h->read();
          for (size_t i = 0; i < s.upper_bounds.size(); ++i)
            out += name + "_bucket" + braces(labels, "le=\"" + number(s.upper_bounds[i]) + '"')
                   + ' ' + std::to_string(s.cumulative[i]) + '\n';
          out += name + "_bucket" + braces(labels, "le=\"+Inf\"") + ' '
                 + std::to_string(s.cumulative.back()) + '\n';
          out += name + "_sum" + braces(labels) + ' ' + number(s.sum) + '\n';
          out += name + "_count" + braces(labels) + ' ' + std::to_string(s.cumulative.back())
                 + '\n';
        }
        break;
    }
  }
  return out;
}

registry& process_registry() {
  static registry instance;
  return instance;
}

} // namespace troupe::metrics
