// bench/rows: issue 28's benchmark 2, Troupe's side. Sparse pull and push of
// embedding rows between two processes over loopback, through a real PS
// shard: on the bulk path as workers send them (rows and push_rows frames,
// W connections, one request in flight on each), or with --path basp as
// the BASP messages (rows, push_rows; W requests in flight on one
// connection). N distinct keys in requests of K keys. Phases: push every key once
// (creates the rows), pull every key, push again, pull again; rows/s and
// MB/s of row payload for each. The peer, ps-lite's KVWorker/KVServer doing
// the same, is bench/ps-lite; bench/sparse-transfer runs both and prints the
// ratio.
//   build/bin/troupe-bench-rows [--keys N] [--dim D] [--request-keys K] [--in-flight W]
//                               [--path bulk|basp]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/bulk_client.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/ps_shard.hpp"
#include "tensor/core/memory_policy.hpp"

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

struct node_cfg : caf::actor_system_config {
  node_cfg() {
    load<caf::io::middleman>();
    register_protocol(*this);
    set("scheduler.policy", caf::atom("sharing")); // as troupe-node (config/node/schema.cpp)
  }
};

struct bench_options {
  int64_t keys = 10'000'000;
  uint32_t dim = 16;
  int64_t request_keys = 100'000;
  int in_flight = 4;
  bool bulk = true; ///< the bulk path (as workers); false: BASP messages
};

constexpr run_id bench_run = 1;
constexpr double learning_rate = 0.01;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The gradient every push sends for element j of `key`'s row: known, so the
// rows can be checked after two pushes (-2 * lr * g under SGD).
float gradient_of(int64_t key, uint32_t j) {
  return 0.001f * static_cast<float>((static_cast<uint64_t>(key) + j) % 7 + 1);
}

std::optional<bench_options> parse_arguments(int argc, char** argv) {
  bench_options out;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: troupe-bench-rows [--keys N] [--dim D] [--request-keys K] "
                           "[--in-flight W] [--path bulk|basp]\n");
      return std::nullopt;
    }
    if (flag == "--path"
        && (std::strcmp(argv[i + 1], "bulk") == 0 || std::strcmp(argv[i + 1], "basp") == 0)) {
      out.bulk = std::strcmp(argv[++i], "bulk") == 0;
      continue;
    }
    long long value = std::atoll(argv[++i]);
    if (flag == "--keys" && value > 0)
      out.keys = value;
    else if (flag == "--dim" && value > 0 && value <= 4096)
      out.dim = static_cast<uint32_t>(value);
    else if (flag == "--request-keys" && value > 0 && value <= (1 << 20))
      out.request_keys = value;
    else if (flag == "--in-flight" && value > 0 && value <= 64)
      out.in_flight = static_cast<int>(value);
    else {
      std::fprintf(stderr, "troupe-bench-rows: %s %s is not understood\n", flag.c_str(), argv[i]);
      return std::nullopt;
    }
  }
  return out;
}

[[noreturn]] void serve(int pipe_fd) {
  {
    node_cfg cfg;
    caf::actor_system sys{cfg};
    ps_shard_config config{0, plain_sgd(learning_rate)};
    config.bulk_host = "127.0.0.1";
    ps_shard_actor shard = sys.spawn(ps_shard, config);
    auto port = sys.middleman().publish(shard, 0, "127.0.0.1", true);
    uint16_t p = port ? *port : uint16_t(0);
    if (::write(pipe_fd, &p, sizeof(p)) != sizeof(p))
      ::_exit(1);
    caf::scoped_actor self{sys};
    self->monitor(shard);
    self->receive([](const caf::down_msg&) {});
  }
  ::_exit(0);
}

table_setup bench_table(const bench_options& o) {
  table_setup setup;
  setup.table.name = "embedding";
  setup.table.dim = o.dim;
  setup.table.init.kind = row_initializer::zeros; // ps-lite's server starts rows at zero
  setup.table.optimizer.kind = sparse_optimizer_kind::sgd;
  setup.table.optimizer.learning_rate = learning_rate;
  setup.max_keys = o.request_keys;
  return setup;
}

// One request's keys and, for a push, its gradients; the keys' and
// counts' bits as the bulk path's frames carry them.
struct request_data {
  step_rows rows;
  tensor key_bits, count_bits;
};

std::vector<request_data> make_requests(const bench_options& o) {
  std::vector<int64_t> all(static_cast<size_t>(o.keys));
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<int64_t>(splitmix64(i) >> 2); // non-negative, distinct in practice
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<request_data> out;
  for (size_t first = 0; first < all.size(); first += static_cast<size_t>(o.request_keys)) {
    size_t n = std::min(all.size() - first, static_cast<size_t>(o.request_keys));
    request_data r;
    r.rows.keys.assign(all.begin() + first, all.begin() + first + n);
    r.rows.counts.assign(n, 1u);
    r.rows.grads = tensor({static_cast<int64_t>(n), static_cast<int64_t>(o.dim)});
    for (size_t k = 0; k < n; ++k)
      for (uint32_t j = 0; j < o.dim; ++j)
        r.rows.grads.data()[k * o.dim + j] = gradient_of(r.rows.keys[k], j);
    r.key_bits = bulk::key_bits(r.rows.keys.data(), n);
    r.count_bits = bulk::count_bits(r.rows.counts.data(), n);
    out.push_back(std::move(r));
  }
  return out;
}

struct phase_result {
  double seconds = 0;
  bool ok = true;
};

// Every request once, W in flight; `check` sees each pull's rows.
template <class Check>
phase_result run_phase(caf::scoped_actor& self, const ps_shard_actor& shard,
                       const std::vector<request_data>& requests, bool push, int in_flight,
                       int64_t& step, Check&& check) {
  phase_result out;
  auto timeout = std::chrono::seconds(120);
  auto pull_of = [](const request_data& r) {
    return pull_request{bench_run, {}, 0, {{0, r.rows.keys}}};
  };
  auto push_of = [](const request_data& r, int64_t s) {
    return step_push{bench_run, 0, s, 0, 0, {}, {}, {r.rows}};
  };
  using pull_handle = decltype(self->request(shard, timeout, pull_atom::value,
                                             pull_of(requests[0])));
  using push_handle = decltype(self->request(shard, timeout, push_atom::value,
                                             push_of(requests[0], 0)));
  std::deque<std::pair<size_t, pull_handle>> pulls;
  std::deque<push_handle> pushes;
  auto fail = [&](caf::error& e) {
    std::fprintf(stderr, "rows: %s\n", to_string(e).c_str());
    out.ok = false;
  };
  auto start = clock_type::now();
  for (size_t next = 0; next < requests.size() || !pulls.empty() || !pushes.empty();) {
    bool room = static_cast<int>(pulls.size() + pushes.size()) < in_flight;
    if (next < requests.size() && room) {
      auto& r = requests[next];
      if (push)
        pushes.push_back(self->request(shard, timeout, push_atom::value, push_of(r, step++)));
      else
        pulls.emplace_back(next, self->request(shard, timeout, pull_atom::value, pull_of(r)));
      ++next;
      continue;
    }
    if (push) {
      pushes.front().receive([](const push_receipt&) {}, fail);
      pushes.pop_front();
    } else {
      auto index = pulls.front().first;
      pulls.front().second.receive([&](const pull_reply& reply) { check(index, reply.rows.at(0)); },
                                   fail);
      pulls.pop_front();
    }
    if (!out.ok)
      return out;
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return out;
}

// The same on the bulk path: one request in flight on each link, every
// link's next started once each round's replies are in (complete_all, as a
// worker's step fans out to its shards).
template <class Check>
phase_result run_bulk_phase(std::vector<std::unique_ptr<bulk_link>>& links,
                            const std::vector<request_data>& requests, bool push, int64_t& step,
                            Check&& check) {
  phase_result out;
  std::vector<size_t> serving(links.size());
  auto start = clock_type::now();
  for (size_t next = 0; next < requests.size() && out.ok;) {
    std::vector<bulk_link*> active;
    for (size_t i = 0; i < links.size() && next < requests.size(); ++i, ++next) {
      auto& r = requests[next];
      serving[i] = next;
      bulk_link::table_part part{0, &r.key_bits, &r.count_bits, &r.rows.grads};
      if (push)
        links[i]->start_push(bench_run, 0, step++, 0, {}, {}, {part});
      else
        links[i]->start_pull(bench_run, {}, {part}, std::move(links[i]->values()));
      active.push_back(links[i].get());
    }
    complete_all(active, bulk::deadline{clock_type::now() + std::chrono::seconds(600)});
    for (size_t i = 0; i < active.size(); ++i) {
      if (active[i]->error()) {
        std::fprintf(stderr, "rows: %s\n", active[i]->error()->message.c_str());
        out.ok = false;
      } else if (!push) {
        check(serving[i], active[i]->values().at(0));
      }
    }
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return out;
}

// W links to the shard's bulk port, each with a ticket of its own.
std::vector<std::unique_ptr<bulk_link>> open_links(caf::scoped_actor& self,
                                                   const ps_shard_actor& shard, int count) {
  std::vector<std::unique_ptr<bulk_link>> out;
  for (int i = 0; i < count; ++i) {
    uint16_t port = 0;
    uint64_t ticket = 0;
    self->request(shard, std::chrono::seconds(60), bulk_atom::value, bench_run, int32_t{0})
      .receive(
        [&](uint16_t p, uint64_t t) {
          port = p;
          ticket = t;
        },
        [](caf::error& e) { std::fprintf(stderr, "bulk: %s\n", to_string(e).c_str()); });
    maybe_failure error;
    auto link = port == 0 ? nullptr
                          : bulk_link::open("127.0.0.1", port, bench_run, ticket, "bench",
                                            clock_type::now() + std::chrono::seconds(60), error);
    if (!link) {
      std::fprintf(stderr, "rows: no bulk link%s%s\n", error ? ": " : "",
                   error ? error->message.c_str() : "");
      return {};
    }
    out.push_back(std::move(link));
  }
  return out;
}

void print_phase(const char* name, const phase_result& r, int64_t rows, uint32_t dim) {
  double rate = static_cast<double>(rows) / r.seconds;
  std::printf("troupe %-10s rows/s %12.0f  MB/s %8.1f  (%.2f s)\n", name, rate,
              rate * dim * sizeof(float) / 1e6, r.seconds);
}

// The shard initialised with the benchmark's one table and no variables.
bool initialise_table(caf::scoped_actor& self, const ps_shard_actor& shard,
                      const bench_options& o) {
  shard_options options;
  options.tables.push_back(bench_table(o));
  options.shards = 1;
  bool initialised = false;
  self
    ->request(shard, std::chrono::seconds(60), init_atom::value, bench_run,
              std::vector<std::string>{}, std::vector<tensor>{}, options)
    .receive([&](caf::ok_atom) { initialised = true; },
             [&](caf::error& e) { std::fprintf(stderr, "init: %s\n", to_string(e).c_str()); });
  return initialised;
}

int run_client(caf::actor_system& sys, uint16_t port, const bench_options& o) {
  auto shard = sys.middleman().remote_actor<ps_shard_actor>("127.0.0.1", port);
  if (!shard) {
    std::fprintf(stderr, "rows: cannot reach the shard: %s\n", sys.render(shard.error()).c_str());
    return 1;
  }
  caf::scoped_actor self{sys};
  if (!initialise_table(self, *shard, o))
    return 1;
  auto requests = make_requests(o);
  int64_t rows = 0;
  for (auto& r : requests)
    rows += static_cast<int64_t>(r.rows.keys.size());
  std::printf("troupe: %lld keys (%lld distinct), dim %u, %lld keys a request, %d in flight, %s\n",
              static_cast<long long>(o.keys), static_cast<long long>(rows), o.dim,
              static_cast<long long>(o.request_keys), o.in_flight, o.bulk ? "bulk path" : "BASP");
  std::vector<std::unique_ptr<bulk_link>> links;
  if (o.bulk && (links = open_links(self, *shard, o.in_flight)).empty())
    return 1;
  int64_t step = 0;
  int pushes_done = 0;
  size_t wrong = 0;
  // After p pushes a row holds -p * lr * g (SGD from zeros); a sample checked.
  auto check = [&](size_t index, const tensor& values) {
    auto& r = requests[index];
    if (static_cast<size_t>(values.size()) != r.rows.keys.size() * o.dim) {
      ++wrong;
      return;
    }
    for (size_t k = 0; k < r.rows.keys.size(); k += 997)
      for (uint32_t j = 0; j < o.dim; ++j) {
        double want = -pushes_done * learning_rate * gradient_of(r.rows.keys[k], j);
        if (std::fabs(values.data()[k * o.dim + j] - want) > 1e-6)
          ++wrong;
      }
  };
  const char* names[] = {"first_push", "pull", "push", "pull_again"};
  double seconds[4] = {};
  for (int phase = 0; phase < 4; ++phase) {
    bool push = phase % 2 == 0;
    auto r = o.bulk ? run_bulk_phase(links, requests, push, step, check)
                    : run_phase(self, *shard, requests, push, o.in_flight, step, check);
    if (!r.ok)
      return 1;
    pushes_done += push;
    seconds[phase] = r.seconds;
    print_phase(names[phase], r, rows, o.dim);
  }
  self->send(*shard, stop_atom::value);
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // let the stop leave
  if (wrong > 0) {
    std::fprintf(stderr, "rows: %zu pulled values differ from the pushes' SGD result\n", wrong);
    return 1;
  }
  auto rate = [&](int phase) { return static_cast<double>(rows) / seconds[phase]; };
  std::printf("{\"peer\":\"troupe\",\"path\":\"%s\",\"keys\":%lld,\"dim\":%u,\"request_keys\":%lld,"
              "\"in_flight\":%d,\"first_push_rows_per_s\":%.0f,\"push_rows_per_s\":%.0f,"
              "\"pull_rows_per_s\":%.0f}\n",
              o.bulk ? "bulk" : "basp", static_cast<long long>(rows), o.dim,
              static_cast<long long>(o.request_keys), o.in_flight, rate(0), rate(2), rate(3));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  keep_freed_tensor_memory(); // as troupe-node, in both processes
  auto options = parse_arguments(argc, argv);
  if (!options)
    return 2;
  int fds[2];
  if (::pipe(fds) != 0)
    return 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    serve(fds[1]);
  }
  ::close(fds[1]);
  uint16_t port = 0;
  if (::read(fds[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::fprintf(stderr, "rows: the server process did not start\n");
    return 1;
  }
  int exit_code = 0;
  {
    node_cfg cfg;
    caf::actor_system sys{cfg};
    exit_code = run_client(sys, port, *options);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return exit_code;
}
