// bench/ps-lite/pslite_rows.cc: the ps-lite peer of bench/rows (issue 28's
// benchmark 2). Sparse push and pull of embedding rows between processes with
// ps-lite's KVWorker / KVServer over its ZeroMQ van.
//
// One binary; ps-lite's environment decides the role (DMLC_ROLE=scheduler|
// server|worker, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER,
// DMLC_NUM_WORKER). bench/ps-lite/run starts all three on 127.0.0.1.
//
// Server: rows of DIM floats per key, plain SGD (row -= lr * grad, lr 0.01),
// rows created as zeros on first push; a pull of an absent key returns zeros
// and inserts nothing. Storage (--store):
//   arena (default): std::unordered_map<Key, size_t> index into one
//     std::vector<float> arena, both reserved for --keys rows up front (the
//     server gets the worker's flags). The stronger of the two layouts.
//   map: std::unordered_map<Key, std::vector<float>>, the row-valued
//     version of ps-lite's own KVServerDefaultHandle (include/ps/kv_app.h),
//     whose store is a std::unordered_map<Key, Val> of scalars; ps-lite ships
//     no row-valued server, so that is the closest "idiomatic" layout.
// Requests use ps-lite's fixed value length: vals.size() == keys.size() * DIM
// (no lens), keys sorted per request as ps-lite's slicer requires.
//
// Worker: N keys splitmix64(i) >> 2 (i < N), sorted, deduplicated (the same
// keys and gradients as bench/rows.cpp), cut into requests of K keys, at most W
// requests in flight (KVWorker timestamps + Wait). ZPush / ZPull with
// zero-copy SArray views of the worker's key, gradient and result buffers.
// Phases, each timed with steady_clock: first_push (creates the rows), pull,
// push, pull_again. MB/s counts row payload (rows * DIM * 4 bytes), as
// bench/rows does. After the timed phases every pulled value is checked:
// -lr*g after one push, -2*lr*g after two; and keys never pushed must pull as
// zeros. Exit 1 on a mismatch.
//
//   pslite-rows [--keys N] [--dim D] [--request-keys K] [--in-flight W]
//               [--store arena|map]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

using namespace ps;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr float learning_rate = 0.01f;

struct options {
  int64_t keys = 10'000'000;
  uint32_t dim = 16;
  int64_t request_keys = 100'000;
  int in_flight = 4;
  bool arena = true;
};

bool parse(int argc, char** argv, options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: pslite-rows [--keys N] [--dim D] [--request-keys K] "
                           "[--in-flight W] [--store arena|map]\n");
      return false;
    }
    std::string arg = argv[++i];
    long long value = std::atoll(arg.c_str());
    if (flag == "--keys" && value > 0)
      o->keys = value;
    else if (flag == "--dim" && value > 0 && value <= 4096)
      o->dim = static_cast<uint32_t>(value);
    else if (flag == "--request-keys" && value > 0 && value <= (1 << 22))
      o->request_keys = value;
    else if (flag == "--in-flight" && value > 0 && value <= 64)
      o->in_flight = static_cast<int>(value);
    else if (flag == "--store" && (arg == "arena" || arg == "map"))
      o->arena = arg == "arena";
    else {
      std::fprintf(stderr, "pslite-rows: %s %s is not understood\n", flag.c_str(), arg.c_str());
      return false;
    }
  }
  return true;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The gradient every push sends for element j of `key`'s row (as bench/rows).
float gradient_of(uint64_t key, uint32_t j) {
  return 0.001f * static_cast<float>((key + j) % 7 + 1);
}

// ---------------------------------------------------------------- server ---

class row_server {
public:
  explicit row_server(const options& o) : dim_(o.dim), arena_mode_(o.arena) {
    size_t n = static_cast<size_t>(o.keys);
    if (arena_mode_) {
      index_.reserve(n);
      arena_.reserve(n * dim_);
    } else {
      rows_.reserve(n);
    }
  }

  // Called by ps-lite's customer thread, one request at a time.
  void operator()(const KVMeta& meta, const KVPairs<float>& req, KVServer<float>* server) {
    const size_t n = req.keys.size();
    if (meta.push) {
      CHECK_EQ(req.vals.size(), n * dim_) << "fixed value length: keys * dim";
      const float* g = req.vals.data();
      for (size_t i = 0; i < n; ++i, g += dim_) {
        float* row = find_or_create(req.keys[i]);
        for (uint32_t j = 0; j < dim_; ++j)
          row[j] -= learning_rate * g[j];
      }
    }
    KVPairs<float> res;
    if (meta.pull) {
      res.keys = req.keys;
      res.vals.resize(n * dim_); // new memory, zero-filled by SArray::resize
      float* out = res.vals.data();
      for (size_t i = 0; i < n; ++i, out += dim_) {
        const float* row = find(req.keys[i]);
        if (row) // absent: left at zero, not inserted
          std::memcpy(out, row, dim_ * sizeof(float));
      }
    }
    server->Response(meta, res);
  }

  size_t size() const { return arena_mode_ ? index_.size() : rows_.size(); }

private:
  float* find_or_create(Key key) {
    if (arena_mode_) {
      auto [it, fresh] = index_.try_emplace(key, arena_.size());
      if (fresh)
        arena_.resize(arena_.size() + dim_, 0.0f);
      return arena_.data() + it->second;
    }
    auto [it, fresh] = rows_.try_emplace(key);
    if (fresh)
      it->second.assign(dim_, 0.0f);
    return it->second.data();
  }

  const float* find(Key key) const {
    if (arena_mode_) {
      auto it = index_.find(key);
      return it == index_.end() ? nullptr : arena_.data() + it->second;
    }
    auto it = rows_.find(key);
    return it == rows_.end() ? nullptr : it->second.data();
  }

  uint32_t dim_;
  bool arena_mode_;
  std::unordered_map<Key, size_t> index_;
  std::vector<float> arena_;
  std::unordered_map<Key, std::vector<float>> rows_;
};

// ---------------------------------------------------------------- worker ---

struct phase_timing {
  double seconds = 0;
};

int run_worker(const options& o) {
  KVWorker<float> kv(0, 0);

  std::vector<Key> keys(static_cast<size_t>(o.keys));
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = splitmix64(i) >> 2; // < 2^62: inside the single server's key range
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const size_t rows = keys.size();
  const size_t dim = o.dim;
  std::vector<float> grads(rows * dim);
  for (size_t k = 0; k < rows; ++k)
    for (uint32_t j = 0; j < dim; ++j)
      grads[k * dim + j] = gradient_of(keys[k], j);
  std::vector<float> pulled(rows * dim);

  // Zero-copy views (deletable = false): ps-lite sends straight from these.
  SArray<Key> all_keys(keys.data(), rows, false);
  SArray<float> all_grads(grads.data(), rows * dim, false);
  const size_t per = static_cast<size_t>(o.request_keys);
  const size_t requests = (rows + per - 1) / per;
  // One pull destination per request; KVWorker keeps a pointer to it until
  // the request's callback has run, so they must not move.
  std::vector<SArray<float>> pull_dest(requests);

  std::printf("pslite: %lld keys (%zu distinct), dim %u, %lld keys a request, %d in flight, "
              "store %s\n",
              static_cast<long long>(o.keys), rows, o.dim, static_cast<long long>(o.request_keys),
              o.in_flight, o.arena ? "arena" : "map");
  std::fflush(stdout);

  auto run_phase = [&](bool push) {
    std::deque<int> in_flight;
    auto start = clock_type::now();
    for (size_t r = 0; r < requests; ++r) {
      if (static_cast<int>(in_flight.size()) >= o.in_flight) {
        kv.Wait(in_flight.front());
        in_flight.pop_front();
      }
      size_t first = r * per, last = std::min(rows, first + per);
      SArray<Key> k = all_keys.segment(first, last);
      int ts;
      if (push) {
        ts = kv.ZPush(k, all_grads.segment(first * dim, last * dim));
      } else {
        pull_dest[r] = SArray<float>(pulled.data() + first * dim, (last - first) * dim, false);
        ts = kv.ZPull(k, &pull_dest[r]);
      }
      in_flight.push_back(ts);
    }
    while (!in_flight.empty()) {
      kv.Wait(in_flight.front());
      in_flight.pop_front();
    }
    return std::chrono::duration<double>(clock_type::now() - start).count();
  };

  size_t wrong = 0;
  auto check_pulled = [&](int pushes) {
    for (size_t k = 0; k < rows; ++k)
      for (uint32_t j = 0; j < dim; ++j) {
        float want = 0.0f;
        for (int p = 0; p < pushes; ++p) // the server's exact float sequence
          want -= learning_rate * grads[k * dim + j];
        double expect = -pushes * static_cast<double>(learning_rate) * gradient_of(keys[k], j);
        float got = pulled[k * dim + j];
        if (got != want || std::fabs(got - expect) > 1e-6) {
          if (wrong < 5)
            std::fprintf(stderr, "pslite: key %llu [%u]: got %g, want %g\n",
                         static_cast<unsigned long long>(keys[k]), j, got, expect);
          ++wrong;
        }
      }
  };

  const char* names[] = {"first_push", "pull", "push", "pull_again"};
  double seconds[4] = {};
  int pushes_done = 0;
  for (int phase = 0; phase < 4; ++phase) {
    bool push = phase % 2 == 0;
    if (!push)
      std::fill(pulled.begin(), pulled.end(), std::nanf(""));
    seconds[phase] = run_phase(push);
    pushes_done += push;
    double rate = static_cast<double>(rows) / seconds[phase];
    std::printf("pslite %-10s rows/s %12.0f  MB/s %8.1f  (%.2f s)\n", names[phase], rate,
                rate * dim * sizeof(float) / 1e6, seconds[phase]);
    std::fflush(stdout);
    if (!push)
      check_pulled(pushes_done); // untimed: every value of every row
  }

  // Keys never pushed pull as zeros (the server must not insert them).
  {
    std::vector<Key> absent;
    for (uint64_t i = 0; absent.size() < 1000; ++i) {
      Key key = splitmix64(static_cast<uint64_t>(o.keys) + i) >> 2;
      if (!std::binary_search(keys.begin(), keys.end(), key))
        absent.push_back(key);
    }
    std::sort(absent.begin(), absent.end());
    absent.erase(std::unique(absent.begin(), absent.end()), absent.end());
    std::vector<float> out;
    kv.Wait(kv.Pull(absent, &out));
    if (out.size() != absent.size() * dim) {
      std::fprintf(stderr, "pslite: absent-key pull returned %zu values\n", out.size());
      ++wrong;
    }
    for (float v : out)
      if (v != 0.0f)
        ++wrong;
  }

  if (wrong > 0) {
    std::fprintf(stderr, "pslite: %zu pulled values differ from the pushes' SGD result\n", wrong);
    return 1;
  }
  std::printf("pslite check ok: all %zu rows x %zu after 1 and 2 pushes, 1000 absent keys zero\n",
              rows, dim);
  auto rate = [&](int phase) { return static_cast<double>(rows) / seconds[phase]; };
  std::printf("{\"peer\":\"ps-lite\",\"keys\":%zu,\"dim\":%u,\"request_keys\":%lld,"
              "\"in_flight\":%d,\"first_push_rows_per_s\":%.0f,\"push_rows_per_s\":%.0f,"
              "\"pull_rows_per_s\":%.0f}\n",
              rows, o.dim, static_cast<long long>(o.request_keys), o.in_flight, rate(0), rate(2),
              rate(3));
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, &o))
    return 2;
  Start(0);
  if (IsServer()) {
    auto* handler = new row_server(o);
    auto* server = new KVServer<float>(0);
    server->set_request_handle(
      [handler](const KVMeta& m, const KVPairs<float>& d, KVServer<float>* s) { (*handler)(m, d, s); });
    RegisterExitCallback([server, handler]() {
      delete server; // stops the customer thread before the store goes
      std::fprintf(stderr, "pslite server: %zu rows stored\n", handler->size());
      delete handler;
    });
  }
  int rc = 0;
  if (IsWorker())
    rc = run_worker(o);
  Finalize(0, true); // barrier: the worker's exit releases server and scheduler
  return rc;
}
