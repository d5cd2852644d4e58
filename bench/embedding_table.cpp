// Embedding table operations on one thread (issue 28, benchmark 1): the key
// -> row index maps side by side (Troupe's row_map, abseil's flat_hash_map,
// tsl's robin_map, when their headers are installed), then the table itself:
// lookups, upserts (first pushes) and Adagrad applies per second at dim
// 1/16/64 on 10^6 and 10^7 rows, uniform and Zipf keys, and resident bytes
// per row against the payload. Each measurement runs in a child process of
// its own, so that one run's freed memory does not hide the next one's.
//
//   troupe-bench-embedding [--quick]     (--quick: 10^6 rows only)
//   troupe-bench-embedding --table DIM ROWS uniform|zipf1.2   one table line
//   troupe-bench-embedding --checkpoint [ROWS]   benchmark 6: a shard's
//     checkpoint of a table of ROWS rows (default 10^7, dim 16, Adagrad):
//     the frozen view taken between two updates (the shard's pause), the
//     file written (MB/s) while pushes go on, the rows copied aside and the
//     peak memory against the table's, and the restore of the file onto 3
//     shards.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if __has_include(<absl/container/flat_hash_map.h>)
#include <absl/container/flat_hash_map.h>
#define TROUPE_HAVE_ABSL 1
#endif
#if __has_include(<tsl/robin_map.h>)
#include <tsl/robin_map.h>
#define TROUPE_HAVE_ROBIN 1
#endif

#include <sys/resource.h>

#include <filesystem>

#include "tensor/checkpoint/table_file.hpp"
#include "tensor/sparse/embedding_table.hpp"

using namespace troupe;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Zipf(s) ranks over [0, n): the inverse CDF by binary search.
std::vector<int64_t> zipf_keys(size_t n, double s, size_t count, uint64_t seed) {
  std::vector<double> cdf(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    cdf[i] = total += std::pow(double(i + 1), -s);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0, total);
  std::vector<int64_t> keys(count);
  for (auto& k : keys)
    k = std::lower_bound(cdf.begin(), cdf.end(), unit(random)) - cdf.begin();
  return keys;
}

std::vector<int64_t> uniform_keys(size_t n, size_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<int64_t> keys(count);
  for (auto& k : keys)
    k = static_cast<int64_t>(random() % n);
  return keys;
}

// Runs `body` in a child process and waits for it.
template <class F>
void in_child(F body) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    body();
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

// One map kind: n inserts, then 4n finds of uniform keys; ns per op and
// resident bytes per key.
template <class Insert, class Find>
void map_run(const char* name, size_t n, Insert insert, Find find) {
  auto keys = uniform_keys(n, 4 * n, 9);
  size_t before = resident_bytes();
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i)
    insert(static_cast<int64_t>(i), static_cast<uint32_t>(i));
  double insert_s = seconds_since(start);
  size_t bytes = resident_bytes() - before;
  start = std::chrono::steady_clock::now();
  uint64_t sum = 0;
  for (int64_t k : keys)
    sum += find(k);
  double find_s = seconds_since(start);
  std::printf("map %-22s keys %9zu  insert %6.1f ns  find %6.1f ns  %5.1f B/key  (check %llu)\n",
              name, n, insert_s / n * 1e9, find_s / keys.size() * 1e9, double(bytes) / n,
              static_cast<unsigned long long>(sum % 7));
}

// A map with std::unordered_map's interface, in a child process.
template <class Map>
void std_map_run(const char* name, size_t n) {
  in_child([&] {
    Map map;
    map_run(
      name, n, [&](int64_t k, uint32_t v) { map.emplace(k, v); },
      [&](int64_t k) { return map.find(k)->second; });
  });
}

void compare_maps(size_t n) {
  in_child([&] {
    row_map map(1);
    map_run(
      "troupe row_map", n, [&](int64_t k, uint32_t v) { map.insert(k, map.hash(k), v); },
      [&](int64_t k) { return map.find(k, map.hash(k)); });
  });
#ifdef TROUPE_HAVE_ABSL
  std_map_run<absl::flat_hash_map<int64_t, uint32_t>>("absl flat_hash_map", n);
#endif
#ifdef TROUPE_HAVE_ROBIN
  std_map_run<tsl::robin_map<int64_t, uint32_t>>("tsl robin_map", n);
#endif
}

// The table at one dim and size, filled by first pushes of every row (in
// batches of 4096 distinct keys), then lookups and Adagrad applies of keys
// drawn by `law` (uniform or Zipf 1.2). Each law gets a process and a table
// of its own: run after another law in the same process, lookups measured
// half to a sixth as fast (an artefact of the process's earlier
// allocations, not of the table: a lone program repeating them after
// applies did not slow down).
// Lookups and Adagrad applies of `stream`'s keys on a filled table: lookups
// in batches of 16384 keys sorted by bucket (the order workers send),
// applies of 4096 keys with each batch's duplicates removed. Prints M/s.
void lookups_and_applies(embedding_table& table, const std::vector<int64_t>& stream,
                         const char* law, size_t rows) {
  auto dim = table.dim();
  auto by_bucket = [&](int64_t a, int64_t b) {
    return table.config().buckets.bucket_of(a) < table.config().buckets.bucket_of(b);
  };
  constexpr size_t pull_batch = 16384, batch = 4096;
  std::vector<int64_t> sorted = stream;
  for (size_t first = 0; first + pull_batch <= sorted.size(); first += pull_batch)
    std::sort(sorted.begin() + first, sorted.begin() + first + pull_batch, by_bucket);
  std::vector<float> pulled(pull_batch * dim);
  auto start = std::chrono::steady_clock::now();
  size_t looked_up = 0;
  for (size_t first = 0; first + pull_batch <= sorted.size();
       first += pull_batch, looked_up += pull_batch)
    table.lookup(sorted.data() + first, pull_batch, pulled.data());
  double lookup_s = seconds_since(start);
  std::vector<std::vector<int64_t>> batches;
  for (size_t first = 0; first + batch <= stream.size(); first += batch) {
    std::vector<int64_t> b(stream.begin() + first, stream.begin() + first + batch);
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    batches.push_back(std::move(b));
  }
  std::vector<uint32_t> counts(batch, 1);
  std::vector<float> grads(batch * dim, 0.01f);
  size_t applied = 0;
  start = std::chrono::steady_clock::now();
  int64_t step = 1;
  for (auto& b : batches) {
    table.apply(b.data(), counts.data(), grads.data(), b.size(), step++);
    applied += b.size();
  }
  double apply_s = seconds_since(start);
  std::printf("table dim %2u rows %9zu  %-8s lookups %6.2f M/s  adagrad applies %6.2f M rows/s\n",
              dim, rows, law, looked_up / lookup_s / 1e6, applied / apply_s / 1e6);
}

void table_run(uint32_t dim, size_t rows, const char* law) {
  embedding_table_config config;
  config.name = "bench";
  config.dim = dim;
  config.optimizer.kind = sparse_optimizer_kind::adagrad;
  constexpr size_t batch = 4096;
  // First pushes as a shard receives them: each batch sorted by bucket,
  // the order workers send.
  auto by_bucket = [&](int64_t a, int64_t b) {
    return config.buckets.bucket_of(a) < config.buckets.bucket_of(b);
  };
  std::vector<std::vector<int64_t>> fills;
  for (size_t first = 0; first < rows; first += batch) {
    fills.emplace_back(std::min(batch, rows - first));
    std::iota(fills.back().begin(), fills.back().end(), static_cast<int64_t>(first));
    std::sort(fills.back().begin(), fills.back().end(), by_bucket);
  }
  std::vector<uint32_t> counts(batch, 1);
  std::vector<float> grads(batch * dim, 0.01f);
  size_t before = resident_bytes(); // the table's bytes only
  embedding_table table(config);
  auto start = std::chrono::steady_clock::now();
  for (auto& fill : fills)
    table.apply(fill.data(), counts.data(), grads.data(), fill.size(), 0);
  double upsert_s = seconds_since(start);
  double bytes_per_row = double(resident_bytes() - before) / rows;
  double payload = (dim * 2) * 4.0;
  std::printf("table dim %2u rows %9zu  upserts %6.2f M/s  resident %6.1f B/row = payload %5.0f "
              "+ %5.1f (table's count: %5.1f)\n",
              dim, rows, rows / upsert_s / 1e6, bytes_per_row, payload, bytes_per_row - payload,
              double(table.bytes()) / rows - payload);
  size_t total = std::min<size_t>(std::max<size_t>(rows, 2000000), 4000000);
  auto stream = law[0] == 'u' ? uniform_keys(rows, total, 5) : zipf_keys(rows, 1.2, total, 5);
  lookups_and_applies(table, stream, law, rows);
}

double peak_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

constexpr size_t checkpoint_batch = 4096;

// Rows 0 .. rows-1, each pushed once with a small gradient.
void fill_in_order(embedding_table& table, size_t rows) {
  std::vector<int64_t> keys(checkpoint_batch);
  std::vector<uint32_t> counts(checkpoint_batch, 1);
  std::vector<float> grads(checkpoint_batch * table.dim(), 0.01f);
  for (size_t first = 0; first < rows; first += checkpoint_batch) {
    size_t n = std::min(checkpoint_batch, rows - first);
    for (size_t i = 0; i < n; ++i)
      keys[i] = static_cast<int64_t>(first + i);
    table.apply(keys.data(), counts.data(), grads.data(), n, 0);
  }
}

struct written_file {
  uint64_t bytes = 0;
  double seconds = 0;
  size_t pushes = 0;
};

// The view's file written on another thread while this one goes on updating
// the table as a shard under training would: pushes of up to 4096 distinct
// keys of `hot`, 10 ms apart, so that the view copies the rows that change
// before they are written.
written_file write_beside_pushes(embedding_table& table, table_snapshot& view,
                                 const std::vector<int64_t>& hot,
                                 const std::filesystem::path& path) {
  written_file out;
  std::atomic<bool> written{false};
  auto start = std::chrono::steady_clock::now();
  std::thread writer_thread([&] {
    auto meta = view.metadata();
    safetensors_writer writer(path.string(), view.entries(), {{meta.first, meta.second}});
    view.append_to(writer);
    out.bytes = writer.finish().second;
    written = true;
  });
  std::vector<uint32_t> counts(checkpoint_batch, 1);
  std::vector<float> grads(checkpoint_batch * table.dim(), 0.01f);
  size_t at = 0;
  while (!written) {
    std::vector<int64_t> push_keys(hot.begin() + static_cast<std::ptrdiff_t>(at),
                                   hot.begin()
                                     + static_cast<std::ptrdiff_t>(at + checkpoint_batch));
    at = (at + checkpoint_batch) % (hot.size() - checkpoint_batch);
    std::sort(push_keys.begin(), push_keys.end());
    push_keys.erase(std::unique(push_keys.begin(), push_keys.end()), push_keys.end());
    table.apply(push_keys.data(), counts.data(), grads.data(), push_keys.size(),
                static_cast<int64_t>(1 + out.pushes++));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  writer_thread.join();
  out.seconds = seconds_since(start);
  return out;
}

struct rows_in {
  size_t rows = 0;
  double seconds = 0;
  double most_added_mib = 0; ///< resident memory added at most, where measured
};

// Restore onto 3 shards: the file read once for all three (as the chief
// restores), or a pass per shard (as it did before).
rows_in restore_onto_three(const std::filesystem::path& path, const embedding_table_config& config,
                           bool one_pass) {
  rows_in out;
  auto start = std::chrono::steady_clock::now();
  safetensors_file file(path.string());
  if (one_pass) {
    std::vector<std::unique_ptr<embedding_table>> parts;
    std::vector<embedding_table*> targets;
    for (int s = 0; s < 3; ++s) {
      parts.push_back(std::make_unique<embedding_table>(config));
      targets.push_back(parts.back().get());
    }
    out.rows = restore_table_rows(file, targets);
  } else {
    for (uint32_t shard = 0; shard < 3; ++shard) {
      embedding_table part(config);
      out.rows += restore_table_rows(file, part, shard, 3);
    }
  }
  out.seconds = seconds_since(start);
  return out;
}

// What the chief does on restore: the file read in batches of 65,536 rows
// for 3 shards, each batch dropped as a sent message would be; the most
// resident memory it added at any batch.
rows_in chief_restore_reading(const std::filesystem::path& path,
                              const embedding_table_config& config) {
  rows_in out;
  auto start = std::chrono::steady_clock::now();
  double resident_at_start = double(resident_bytes()) / (1 << 20);
  safetensors_file file(path.string());
  saved_table_reader reader({&file}, config, 3, size_t{1} << 16);
  while (auto batch = reader.next()) {
    out.rows += batch->keys.size();
    out.most_added_mib = std::max(out.most_added_mib,
                                  double(resident_bytes()) / (1 << 20) - resident_at_start);
  }
  out.seconds = seconds_since(start);
  return out;
}

// Benchmark 6: what a shard's checkpoint of one table costs.
void checkpoint_run(size_t rows) {
  embedding_table_config config;
  config.name = "bench";
  config.dim = 16;
  config.optimizer.kind = sparse_optimizer_kind::adagrad;
  // The keys pushed while the file is written, drawn first so that drawing
  // them does not count in the memory measured.
  auto hot = zipf_keys(rows, 1.2, size_t{1} << 22, 11);
  embedding_table table(config);
  fill_in_order(table, rows);
  double table_mib = double(table.bytes()) / (1 << 20);
  double before = peak_mib(), resident_before = double(resident_bytes()) / (1 << 20);
  auto start = std::chrono::steady_clock::now();
  std::optional<table_snapshot> view(std::in_place, table);
  double pause_s = seconds_since(start);
  double after_freeze = double(resident_bytes()) / (1 << 20);
  auto path = std::filesystem::temp_directory_path()
              / ("troupe-bench-ckpt-" + std::to_string(getpid()));
  auto file = write_beside_pushes(table, *view, hot, path);
  size_t copied = table.frozen_copies();
  double after_write = double(resident_bytes()) / (1 << 20), peak = peak_mib();
  view.reset();
  auto one_pass = restore_onto_three(path, config, true);
  auto per_shard = restore_onto_three(path, config, false);
  auto read = chief_restore_reading(path, config);
  std::filesystem::remove(path);
  std::printf("checkpoint of %zu rows (dim 16, Adagrad; the table holds %.0f MiB):\n", rows,
              table_mib);
  std::printf("  freeze between two updates (the shard's pause): %.3f s\n", pause_s);
  std::printf("  file: %.0f MiB written in %.3f s, %.0f MB/s, beside %zu pushes of up to %zu "
              "Zipf(1.2) keys, 10 ms apart\n",
              double(file.bytes) / (1 << 20), file.seconds, double(file.bytes) / file.seconds / 1e6,
              file.pushes, checkpoint_batch);
  std::printf("  rows copied aside (changed before they were written): %zu of %zu (%.1f%%)\n",
              copied, rows, 100.0 * double(copied) / double(rows));
  std::printf("  resident: %.0f MiB before, %.0f after the freeze (+%.0f), %.0f with the file "
              "written and the copies still held (+%.0f); peak %.0f MiB against %.0f before\n",
              resident_before, after_freeze, after_freeze - resident_before, after_write,
              after_write - resident_before, peak, before);
  std::printf("  restore onto 3 shards, one pass: %zu rows in %.3f s (%.2f M rows/s)\n",
              one_pass.rows, one_pass.seconds, double(one_pass.rows) / one_pass.seconds / 1e6);
  std::printf("  restore onto 3 shards, a pass per shard (before): %zu rows in %.3f s (%.2f M "
              "rows/s); one pass is %.2fx faster\n",
              per_shard.rows, per_shard.seconds, double(per_shard.rows) / per_shard.seconds / 1e6,
              per_shard.seconds / one_pass.seconds);
  std::printf("  the chief's restore reading (batches of 65,536 rows for 3 shards): %zu rows in "
              "%.3f s (%.2f M rows/s), resident at most +%.0f MiB\n",
              read.rows, read.seconds, double(read.rows) / read.seconds / 1e6, read.most_added_mib);
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--checkpoint") == 0) {
    checkpoint_run(argc > 2 ? std::stoul(argv[2]) : 10000000);
    return 0;
  }
  if (argc > 4 && std::strcmp(argv[1], "--table") == 0) {
    in_child([&] { table_run(std::stoul(argv[2]), std::stoul(argv[3]), argv[4]); });
    return 0;
  }
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<size_t> sizes = {1000000};
  if (!quick)
    sizes.push_back(10000000);
  std::printf("# one thread; every line a fresh child process\n");
  for (size_t n : sizes)
    compare_maps(n);
  for (size_t n : sizes)
    for (uint32_t dim : {1u, 16u, 64u})
      for (const char* law : {"uniform", "zipf1.2"})
        in_child([&] { table_run(dim, n, law); });
  std::printf(
    "# targets (issue 28): >= 10 M lookups/s at dim 16; resident <= payload + 48 B/row\n");
}
