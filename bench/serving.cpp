// troupe-bench-serving [MODEL [ROWS [SECONDS]]]: troupe-serve's answers,
// measured: predictions/s and the p50/p99 latency of one-row and 100-row
// requests from 2 client threads, first with no update, then while a delta
// of 10^5 rows is applied again and again (issue 55's target: p99 during
// updates <= 1.5x the p99 without). MODEL: fm (default) or deepfm; ROWS:
// the table's rows (default 10^6). The model is written here (a base and
// deltas in a temporary serving directory), served by the serve_endpoint
// troupe-serve runs, on a free port of 127.0.0.1, and asked over HTTP with
// cpp-httplib's client, keep-alive, in this process.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <pthread.h>
#include <sched.h>

#include "apps/serve/serve_endpoint.hpp"
#include "tensor/data/sparse_lines.hpp"
#include "tensor/export/table_export.hpp"

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

struct setup {
  std::unique_ptr<model> net;
  model_card card;
};

setup model_of(const std::string& kind) {
  model_options o;
  o.keys = {criteo::dense_values, criteo::categorical_fields, 1};
  o.classes = 2;
  o.embedding_dim = 8;
  if (kind == "deepfm")
    o.deep_layers = {64, 32};
  auto model_kind_ = kind == "deepfm" ? model_kind::deepfm : model_kind::fm;
  setup s;
  s.net = make_model(model_kind_, o);
  s.card = describe_model(model_kind_, *s.net, nullptr, 0);
  s.card.keys = o.keys;
  s.card.deep_layers = o.deep_layers;
  s.card.table_init = {row_initializer::normal, 0.01, 1};
  return s;
}

// Criteo lines whose ids are drawn from the table's keys.
std::vector<std::string> request_lines(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  char hex[16];
  for (size_t i = 0; i < n; ++i) {
    std::string line = "0";
    for (int f = 0; f < criteo::integer_fields; ++f)
      line += "\t" + std::to_string(rng() % 100);
    for (int f = 0; f < criteo::categorical_fields; ++f) {
      std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(rng() % 40000));
      line += std::string("\t") + hex;
    }
    out.push_back(line);
  }
  return out;
}

// This thread below the server's (troupe-serve's watcher does the same).
void lower_priority() {
  sched_param none{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
}

std::string body_of(const std::vector<std::string>& lines, size_t first, size_t n) {
  std::string body = "{\"rows\":[";
  for (size_t i = 0; i < n; ++i) {
    body += i ? ",\"" : "\"";
    for (char c : lines[(first + i) % lines.size()])
      body += c == '\t' ? std::string("\\t") : std::string(1, c);
    body += "\"";
  }
  return body + "]}";
}

struct figures {
  double per_second = 0, p50_ms = 0, p99_ms = 0;
  size_t requests = 0;
};

// `clients` threads asking batches of `rows` for `seconds`.
// `during`: only requests begun while it is true count (a window of
// updates); null: all.
figures load(uint16_t port, const std::vector<std::string>& lines, size_t rows, double seconds,
             int clients, const std::atomic<bool>* during = nullptr) {
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::atomic<size_t> failures{0};
  auto end = clock_type::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      size_t i = static_cast<size_t>(c) * 7919;
      while (clock_type::now() < end) {
        auto body = body_of(lines, i, rows);
        i += rows;
        bool counted = !during || *during;
        auto t0 = clock_type::now();
        auto res = client.Post("/v1/predict", body, "application/json");
        auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        if (!res || res->status != 200)
          ++failures;
        else if (counted)
          latencies[static_cast<size_t>(c)].push_back(ms);
      }
    });
  for (auto& t : threads)
    t.join();
  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  figures f;
  f.requests = all.size();
  if (all.empty())
    return f;
  double sum = 0;
  for (double ms : all)
    sum += ms;
  // Predictions a second of the window counted, from the clients' view.
  f.per_second = static_cast<double>(all.size() * rows) * clients / (sum / 1000);
  f.p50_ms = all[all.size() / 2];
  f.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  if (failures)
    std::printf("  (%zu requests failed)\n", failures.load());
  return f;
}

void print(const char* what, size_t rows, const figures& f) {
  std::printf("  %-24s batch %3zu: %9.0f predictions/s  p50 %6.2f ms  p99 %6.2f ms  (%zu "
              "requests)\n",
              what, rows, f.per_second, f.p50_ms, f.p99_ms, f.requests);
}

} // namespace

int main(int argc, char** argv) {
  std::string kind = argc > 1 ? argv[1] : "fm";
  size_t table_rows = argc > 2 ? std::stoul(argv[2]) : 1000000;
  double seconds = argc > 3 ? std::stod(argv[3]) : 8;
  const size_t delta_rows = 100000;
  const int pending = 60; // deltas applied during a run
  auto dir = std::filesystem::temp_directory_path() / ("troupe-bench-serving-" + kind);
  std::filesystem::remove_all(dir);
  auto s = model_of(kind);
  // The base: `table_rows` rows, keys as request_lines' ids map them.
  embedding_table_config config;
  config.name = "embedding";
  config.dim = s.card.table_dim();
  config.optimizer.kind = sparse_optimizer_kind::sgd;
  auto table = std::make_shared<embedding_table>(config);
  std::vector<int64_t> keys;
  char hex[16];
  for (uint32_t f = 0; f < criteo::categorical_fields && keys.size() < table_rows; ++f)
    for (uint32_t id = 0; id < 40000 && keys.size() < table_rows; ++id) {
      std::snprintf(hex, sizeof hex, "%08x", id);
      keys.push_back(field_key(f, hex));
    }
  for (int64_t k = static_cast<int64_t>(keys.size()); keys.size() < table_rows; ++k)
    keys.push_back(k * 7919 + 13);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 0.01f);
  std::vector<float> row(config.dim);
  for (auto k : keys) {
    for (auto& x : row)
      x = normal(rng);
    table->restore(k, row.data(), {});
  }
  auto dense = initial_values(*s.net, 1);
  write_base(dir.string(), 1, s.card, s.net->variables(), dense, rows_of_table(table).get());
  serve::model_versions versions(dir.string());
  versions.refresh();
  metrics::registry registry;
  serve::serve_settings settings;
  settings.port = 0;
  serve::serve_endpoint endpoint(settings, versions, registry);
  std::printf("troupe-bench-serving: model %s, %zu rows (dim %u), %s, 2 client threads, %.0f s a "
              "run, this machine's %u cores shared by clients and server\n",
              kind.c_str(), table->rows(), config.dim, endpoint.url().c_str(), seconds,
              std::thread::hardware_concurrency());
  auto lines = request_lines(20000, 5);
  // Deltas of `delta_rows` rows each (drawn ahead; each is written to the
  // directory, then applied: the apply is what the readers share the
  // machine with).
  std::vector<table_change> changes(4);
  for (size_t c = 0; c < changes.size(); ++c) {
    auto& change = changes[c];
    for (size_t i = 0; i < delta_rows; ++i)
      change.keys.push_back(keys[(c * 104729 + i * 7) % keys.size()]);
    std::sort(change.keys.begin(), change.keys.end());
    change.keys.erase(std::unique(change.keys.begin(), change.keys.end()), change.keys.end());
    change.values.resize(change.keys.size() * config.dim);
    for (auto& x : change.values)
      x = normal(rng);
  }
  for (size_t rows : {size_t{1}, size_t{100}}) {
    load(endpoint.port(), lines, rows, 1, 2); // warm up
    auto quiet = load(endpoint.port(), lines, rows, seconds, 2);
    print("no update", rows, quiet);
    // While deltas apply back to back (each moved into place, then applied).
    std::atomic<int> applied{0};
    std::atomic<bool> applying{true};
    double apply_seconds = 0;
    // Written ahead (the chief writes them elsewhere); the updater applies
    // them one after another while the clients ask, at a lower priority
    // than the server's threads, as troupe-serve's watcher runs.
    auto from = versions.current()->version;
    for (int64_t v = from + 1; v <= from + pending; ++v)
      write_delta(dir.string(), {v, v - 1, v}, changes[static_cast<size_t>(v) % changes.size()],
                  config.dim, s.net->variables(), dense);
    std::thread updater([&] {
      lower_priority();
      auto t0 = clock_type::now();
      auto look = versions.refresh();
      apply_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
      applied = static_cast<int>(look.applied.size());
      applying = false;
      if (!look.refused.empty())
        std::printf("  refused: %s\n", look.refused[0].c_str());
    });
    auto busy = load(endpoint.port(), lines, rows, seconds, 2, &applying);
    updater.join();
    print("deltas applying", rows, busy);
    std::printf("  %d deltas of ~%zu rows applied in %.1f s (%.2f s each), p99 ratio %.2f (target "
                "<= 1.5)\n",
                applied.load(), delta_rows, apply_seconds, applied ? apply_seconds / applied : 0.0,
                quiet.p99_ms > 0 ? busy.p99_ms / quiet.p99_ms : 0.0);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
