// bench/transfer: pull + push throughput of one tensor between two processes
// over loopback, through a real PS shard, on the bulk path (what workers in
// other processes use) and on BASP (the control connection), beside a raw
// TCP stream that moves the same bytes between the same two processes in the
// same run. Prints MB/s for each and the ratios to raw TCP (issue 18's P1:
// bulk >= 0.80 at 4 MB and 40 MB); raw TCP and the bulk path are measured
// three times each, in turns, and their medians compared. Then the round trip of a pull of a
// 64-byte tensor on each path beside a 64-byte raw TCP echo: median and p99
// (P2: bulk median <= 1.5 x raw). With --tls it also moves the tensors
// through a second shard under mutual TLS (a throwaway certificate made
// here): on its bulk path, which workers of a TLS cluster use (issue 25:
// TLS must not cost the fast path), and over BASP (CAF's openssl module);
// it prints TLS bulk / plain bulk and TLS BASP / plain BASP.
//   build/bin/troupe-bench-transfer [--rounds N] [--tls]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <openssl/pem.h>

#include "actors/net/bulk_client.hpp"
#include "actors/net/openssl_error_queue.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/ps_shard.hpp"
#include "tensor/core/memory_policy.hpp"
#include "tests/support/self_signed.hpp"

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

// Where the throwaway identity lives; empty without --tls.
std::string tls_dir;

struct node_cfg : caf::actor_system_config {
  node_cfg() {
    load<caf::io::middleman>();
    load<caf::openssl::manager>();
    register_protocol(*this);
    set("scheduler.policy", caf::atom("sharing")); // as troupe-node (config/node/schema.cpp)
    if (!tls_dir.empty()) {
      openssl_certificate = tls_dir + "/node.pem";
      openssl_key = tls_dir + "/node.key";
      openssl_cafile = tls_dir + "/node.pem"; // self-signed: its own CA
    }
  }
};

// The throwaway identity as the bulk path's TLS files.
bulk::tls_files bench_tls_files() {
  return {tls_dir + "/node.pem", tls_dir + "/node.key", "", tls_dir + "/node.pem", ""};
}

// A self-signed P-256 certificate both processes present and trust.
bool make_throwaway_identity(const std::string& dir) {
  troupe::testing::self_signed_identity id{"troupe-bench"};
  bool ok = id.ok;
  FILE* pem = std::fopen((dir + "/node.pem").c_str(), "w");
  FILE* priv = std::fopen((dir + "/node.key").c_str(), "w");
  ok = ok && pem && priv && PEM_write_X509(pem, id.cert) == 1
       && PEM_write_PrivateKey(priv, id.key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (pem)
    std::fclose(pem);
  if (priv)
    std::fclose(priv);
  return ok;
}

// Calls io(fd, p, left) until all n bytes moved; false on an error or EOF.
template <class Byte, class Io>
bool move_all(int fd, Byte* p, size_t n, Io io) {
  while (n > 0) {
    auto moved = io(fd, p, n);
    if (moved <= 0)
      return false;
    p += moved;
    n -= static_cast<size_t>(moved);
  }
  return true;
}

bool read_all(int fd, void* buf, size_t n) {
  return move_all(fd, static_cast<char*>(buf), n, ::read);
}

bool write_all(int fd, const void* buf, size_t n) {
  return move_all(fd, static_cast<const char*>(buf), n, ::write);
}

// Raw TCP: for each request, read a size header and that many bytes (the
// push), then send as many bytes back (the pull).
void raw_echo_server(int listen_fd) {
  int fd = ::accept(listen_fd, nullptr, nullptr);
  if (fd < 0)
    return;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> buf;
  uint64_t n = 0;
  while (read_all(fd, &n, sizeof(n)) && n > 0) {
    buf.resize(n);
    if (!read_all(fd, buf.data(), n) || !write_all(fd, buf.data(), n))
      break;
  }
  ::close(fd);
}

int listen_loopback(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(fd, 1);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

[[noreturn]] void serve(int pipe_fd) {
  uint16_t raw_port = 0;
  int listen_fd = listen_loopback(raw_port);
  std::thread raw([listen_fd] { raw_echo_server(listen_fd); });
  {
    node_cfg cfg;
    caf::actor_system sys{cfg};
    // A negligible learning rate keeps the values (nearly) fixed while every
    // push is still applied.
    ps_shard_config config{0, plain_sgd(1e-20)};
    config.bulk_host = "127.0.0.1";
    ps_shard_actor shard = sys.spawn(ps_shard, config);
    auto port = sys.middleman().publish(shard, 0, "127.0.0.1", true);
    ps_shard_actor tls_shard;
    uint16_t tls_port = 0;
    if (!tls_dir.empty()) {
      ps_shard_config secure{1, plain_sgd(1e-20)};
      secure.bulk_host = "127.0.0.1";
      maybe_failure error;
      secure.bulk_tls = bulk::tls_context::make(bench_tls_files(), error);
      if (!secure.bulk_tls)
        ::_exit(1);
      tls_shard = sys.spawn(ps_shard, secure);
      auto published = caf::openssl::publish(tls_shard, 0, "127.0.0.1", true);
      tls_port = published ? *published : uint16_t(0);
    }
    uint16_t ports[3] = {port ? *port : uint16_t(0), raw_port, tls_port};
    if (::write(pipe_fd, ports, sizeof(ports)) != sizeof(ports))
      ::_exit(1);
    caf::scoped_actor self{sys};
    self->monitor(shard);
    self->receive([](const caf::down_msg&) {});
    if (tls_shard) {
      self->monitor(tls_shard);
      self->receive([](const caf::down_msg&) {});
    }
  }
  raw.join();
  ::close(listen_fd);
  ::_exit(0);
}

// The run the benchmark initialises the shard for.
constexpr run_id bench_run = 1;

// A bulk link to `shard` (under TLS with `tls`), or null (logged).
std::unique_ptr<bulk_link> open_link(caf::scoped_actor& chief, const ps_shard_actor& shard,
                                     const bulk::tls_context* tls) {
  uint16_t bulk_port = 0;
  uint64_t ticket = 0;
  chief->request(shard, std::chrono::seconds(10), bulk_atom::value, bench_run, int32_t{0})
    .receive([&](uint16_t port, uint64_t t) { bulk_port = port, ticket = t; },
             [&](caf::error& e) { std::fprintf(stderr, "bulk: %s\n", describe(e).c_str()); });
  maybe_failure error;
  auto link = bulk_link::open("127.0.0.1", bulk_port, bench_run, ticket, "bench",
                              clock_type::now() + std::chrono::seconds(10), error, tls);
  if (!link)
    std::fprintf(stderr, "transfer: no bulk path%s: %s\n", tls ? " under TLS" : "",
                 error ? error->message.c_str() : "");
  return link;
}

// Each push is a new global step: a shard applies a step once.
int64_t next_step = 0;

// MB/s of `rounds` round trips that each move `bytes` both ways (after one
// warm-up round); -1 when a round fails.
template <class Round>
double mb_per_s(size_t bytes, int rounds, Round&& one_round) {
  one_round(); // warm-up
  auto start = clock_type::now();
  for (int i = 0; i < rounds; ++i)
    if (!one_round())
      return -1;
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  return 2.0 * static_cast<double>(bytes) * rounds / secs / 1e6;
}

double troupe_mb_per_s(caf::actor_system& sys, ps_shard_actor shard, const std::string& name,
                       size_t floats, int rounds) {
  caf::scoped_actor self{sys};
  tensor gradient({static_cast<int64_t>(floats)}, 1e-3f);
  std::vector<std::string> names{name};
  auto timeout = std::chrono::seconds(60);
  return mb_per_s(floats * sizeof(float), rounds, [&] {
    bool ok = true;
    self->request(shard, timeout, pull_atom::value, pull_request{bench_run, names, 0, {}})
      .receive([](const pull_reply&) {}, [&](caf::error&) { ok = false; });
    self
      ->request(shard, timeout, push_atom::value,
                step_push{bench_run, 0, next_step++, 0, 0, names, {gradient}, {}})
      .receive([](const push_receipt&) {}, [&](caf::error&) { ok = false; });
    return ok;
  });
}

double bulk_mb_per_s(bulk_link& link, const std::string& name, size_t floats, int rounds) {
  std::vector<tensor> gradient{tensor({static_cast<int64_t>(floats)}, 1e-3f)};
  std::vector<std::string> names{name};
  std::vector<tensor> values;
  auto rate = mb_per_s(floats * sizeof(float), rounds, [&] {
    auto until = clock_type::now() + std::chrono::seconds(60);
    link.start_pull(bench_run, names, {}, std::move(values));
    complete_all({&link}, until);
    if (link.error())
      return false;
    values = std::move(link.values());
    link.start_push(bench_run, 0, next_step++, 0, names, gradient, {});
    complete_all({&link}, until);
    return !link.error();
  });
  if (rate < 0)
    std::fprintf(stderr, "bulk: %s\n", link.error()->message.c_str());
  return rate;
}

// Round trips in microseconds, sorted.
template <class RoundTrip>
std::vector<double> round_trips(int rounds, RoundTrip&& one) {
  std::vector<double> out;
  for (int i = 0; i < 100; ++i) // warm-up
    if (!one())
      return {};
  for (int i = 0; i < rounds; ++i) {
    auto start = clock_type::now();
    if (!one())
      return {};
    out.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
  }
  std::sort(out.begin(), out.end());
  return out;
}

double percentile(const std::vector<double>& sorted, double p) {
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

double raw_mb_per_s(int fd, size_t bytes, int rounds) {
  std::vector<char> out(bytes, 1), in(bytes);
  uint64_t n = bytes;
  return mb_per_s(bytes, rounds, [&] {
    return write_all(fd, &n, sizeof(n)) && write_all(fd, out.data(), bytes)
           && read_all(fd, in.data(), bytes);
  });
}

// `self` becomes the shard's chief: the only one its stop counts from.
bool initialise(caf::scoped_actor& self, ps_shard_actor shard,
                const std::vector<std::string>& names, const std::vector<tensor>& values) {
  bool initialised = false;
  self
    ->request(shard, std::chrono::seconds(60), init_atom::value, bench_run, names, values,
              shard_options{})
    .receive([&](caf::ok_atom) { initialised = true; },
             [&](caf::error& e) { std::fprintf(stderr, "init: %s\n", describe(e).c_str()); });
  return initialised;
}

struct bench_options {
  int rounds_40mb = 10; ///< rounds at 40 MB; smaller tensors take proportionally more
  bool tls = false;
};

// The command line; nullopt (usage printed) when it is not understood.
std::optional<bench_options> parse_arguments(int argc, char** argv) {
  bench_options out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc)
      out.rounds_40mb = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--tls")
      out.tls = true;
    else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--tls]\n", argv[0]);
      return std::nullopt;
    }
  }
  return out;
}

// --tls: the OpenSSL fix in place, and the throwaway identity in tls_dir.
bool prepare_tls() {
  if (auto problem = openssl_error_queue_problem(); !problem.empty()) {
    std::fprintf(stderr, "transfer: %s\n", problem.c_str());
    return false;
  }
  char dir[] = "/tmp/troupe-bench-tls-XXXXXX";
  if (!::mkdtemp(dir) || !make_throwaway_identity(dir)) {
    std::fprintf(stderr, "transfer: cannot make a throwaway certificate\n");
    return false;
  }
  tls_dir = dir;
  return true;
}

// Forks the server process; its ports: the shard, raw TCP, the TLS shard
// (0 without --tls). False when it did not start.
bool start_server(bool tls, pid_t& child, uint16_t (&ports)[3]) {
  int fds[2];
  if (::pipe(fds) != 0)
    return false;
  child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    serve(fds[1]);
  }
  ::close(fds[1]);
  if (::read(fds[0], ports, sizeof(ports)) != sizeof(ports) || ports[0] == 0
      || (tls && ports[2] == 0)) {
    std::fprintf(stderr, "transfer: the server process did not start\n");
    return false;
  }
  return true;
}

// A connection to the raw TCP echo server, or -1.
int connect_raw(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr, "transfer: cannot reach the raw TCP server\n");
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

constexpr size_t sizes_mb[] = {1, 4, 40};

// The client's side: the shards (the TLS one with --tls) initialised with
// one tensor per size and a 64-byte one, a bulk link to each, raw TCP.
struct client {
  bool tls = false;
  ps_shard_actor shard, tls_shard;
  int raw_fd = -1;
  std::vector<std::string> names;
  std::vector<tensor> values;
  std::shared_ptr<const bulk::tls_context> tls_ctx;
  std::unique_ptr<bulk_link> link, tls_link;
};

// Reaches the server's shards and raw TCP and initialises the shards; false
// (logged) when any of it fails.
bool connect_client(caf::actor_system& sys, caf::scoped_actor& chief, const uint16_t (&ports)[3],
                    client& c) {
  auto shard = sys.middleman().remote_actor<ps_shard_actor>("127.0.0.1", ports[0]);
  if (!shard) {
    std::fprintf(stderr, "transfer: cannot reach the shard: %s\n",
                 sys.render(shard.error()).c_str());
    return false;
  }
  c.shard = *shard;
  if (c.tls) {
    auto tls_shard = caf::openssl::remote_actor<ps_shard_actor>(sys, "127.0.0.1", ports[2]);
    if (!tls_shard) {
      std::fprintf(stderr, "transfer: cannot reach the TLS shard: %s\n",
                   sys.render(tls_shard.error()).c_str());
      return false;
    }
    c.tls_shard = *tls_shard;
  }
  if ((c.raw_fd = connect_raw(ports[1])) < 0)
    return false;
  for (auto mb : sizes_mb) {
    c.names.push_back("v" + std::to_string(mb) + "mb");
    c.values.emplace_back(shape_t{static_cast<int64_t>(mb * 1000 * 1000 / 4)}, 0.5f);
  }
  c.names.push_back("v64b");
  c.values.emplace_back(shape_t{16}, 0.5f);
  if (!initialise(chief, c.shard, c.names, c.values)
      || (c.tls && !initialise(chief, c.tls_shard, c.names, c.values)))
    return false;
  if (!(c.link = open_link(chief, c.shard, nullptr)))
    return false;
  if (c.tls) {
    maybe_failure error;
    c.tls_ctx = bulk::tls_context::make(bench_tls_files(), error);
    c.tls_link = c.tls_ctx ? open_link(chief, c.tls_shard, c.tls_ctx.get()) : nullptr;
    if (!c.tls_link)
      return false;
  }
  return true;
}

// The median of three measurements, or -1 when one failed.
double median_of_three(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.front() < 0 ? -1 : v[1];
}

// P1: MB/s of pull + push per size on each path, and the ratios; false
// when a round failed.
bool measure_throughput(caf::actor_system& sys, client& c, int rounds_40mb) {
  std::printf("bench/transfer: pull+push of one tensor between two processes over 127.0.0.1\n");
  std::printf("%8s %7s %13s %10s %9s %10s %9s", "size", "rounds", "raw TCP MB/s", "bulk MB/s",
              "bulk/raw", "BASP MB/s", "BASP/raw");
  if (c.tls)
    std::printf(" %14s %14s %14s %14s\n", "TLS bulk MB/s", "TLS/plain bulk", "TLS BASP MB/s",
                "TLS/plain BASP");
  else
    std::printf("\n");
  for (size_t i = 0; i < 3; ++i) {
    int rounds = static_cast<int>(rounds_40mb * 40 / sizes_mb[i]);
    auto& name = c.names[i];
    auto floats = c.values[i].size();
    // Raw TCP and the bulk path take turns, three times each; the medians
    // are compared (the machine's noise hits both alike).
    std::vector<double> raws, bulks, tls_bulks;
    for (int turn = 0; turn < 3; ++turn) {
      raws.push_back(raw_mb_per_s(c.raw_fd, c.values[i].bytes(), rounds));
      bulks.push_back(bulk_mb_per_s(*c.link, name, floats, rounds));
      if (c.tls)
        tls_bulks.push_back(bulk_mb_per_s(*c.tls_link, name, floats, rounds));
    }
    double raw = median_of_three(raws);
    double bulk = median_of_three(bulks);
    double tls_bulk = c.tls ? median_of_three(tls_bulks) : 0;
    double basp = troupe_mb_per_s(sys, c.shard, name, floats, rounds);
    double over_tls = c.tls ? troupe_mb_per_s(sys, c.tls_shard, name, floats, rounds) : 0;
    if (basp < 0 || bulk < 0 || raw < 0 || over_tls < 0 || tls_bulk < 0) {
      std::fprintf(stderr, "transfer: a round failed at %zu MB\n", sizes_mb[i]);
      return false;
    }
    std::printf("%6zuMB %7d %13.0f %10.0f %9.2f %10.0f %9.2f", sizes_mb[i], rounds, raw, bulk,
                bulk / raw, basp, basp / raw);
    if (c.tls)
      std::printf(" %14.0f %14.2f %14.0f %14.2f\n", tls_bulk, tls_bulk / bulk, over_tls,
                  over_tls / basp);
    else
      std::printf("\n");
  }
  return true;
}

// Round trips of a 64-byte pull on `link`.
std::vector<double> bulk_round_trips(bulk_link& link, int trips) {
  std::vector<std::string> small_name{"v64b"};
  std::vector<tensor> small_values;
  return round_trips(trips, [&] {
    link.start_pull(bench_run, small_name, {}, std::move(small_values));
    complete_all({&link}, clock_type::now() + std::chrono::seconds(10));
    small_values = std::move(link.values());
    return !link.error();
  });
}

// P2: the round trip of a 64-byte pull on each path beside a raw TCP echo;
// false when one failed.
bool measure_round_trips(caf::scoped_actor& chief, client& c, int rounds_40mb) {
  const int trips = 20 * rounds_40mb * 40;
  std::vector<char> small(64, 1);
  uint64_t small_n = small.size();
  auto raw_trips = round_trips(trips, [&] {
    return write_all(c.raw_fd, &small_n, sizeof(small_n))
           && write_all(c.raw_fd, small.data(), small.size())
           && read_all(c.raw_fd, small.data(), small.size());
  });
  auto bulk_trips = bulk_round_trips(*c.link, trips);
  auto tls_bulk_trips = c.tls ? bulk_round_trips(*c.tls_link, trips) : std::vector<double>{};
  std::vector<std::string> small_name{"v64b"};
  auto basp_trips = round_trips(trips, [&] {
    bool ok = false;
    chief
      ->request(c.shard, std::chrono::seconds(10), pull_atom::value,
                pull_request{bench_run, small_name, 0, {}})
      .receive([&](const pull_reply&) { ok = true; }, [&](caf::error&) {});
    return ok;
  });
  if (raw_trips.empty() || bulk_trips.empty() || basp_trips.empty()) {
    std::fprintf(stderr, "transfer: a 64-byte round trip failed\n");
    return false;
  }
  double raw_median = percentile(raw_trips, 0.5);
  std::printf("\npull of a 64-byte tensor, round trip over %d pulls (P2: bulk median <= 1.5 x "
              "raw)\n%8s %12s %9s %14s\n",
              trips, "path", "median us", "p99 us", "median/raw");
  auto row = [&](const char* path, const std::vector<double>& t) {
    std::printf("%8s %12.1f %9.1f %14.2f\n", path, percentile(t, 0.5), percentile(t, 0.99),
                percentile(t, 0.5) / raw_median);
  };
  row("raw TCP", raw_trips);
  row("bulk", bulk_trips);
  if (c.tls && !tls_bulk_trips.empty())
    row("TLS bulk", tls_bulk_trips);
  row("BASP", basp_trips);
  return true;
}

// Ends the server's side: the links, raw TCP's echo loop and the shards.
void stop_server(caf::scoped_actor& chief, client& c) {
  c.link.reset();
  c.tls_link.reset();
  uint64_t zero = 0;
  write_all(c.raw_fd, &zero, sizeof(zero));
  ::close(c.raw_fd);
  chief->send(c.shard, stop_atom::value);
  if (c.tls)
    chief->send(c.tls_shard, stop_atom::value);
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // let the stop leave
}

} // namespace

int main(int argc, char** argv) {
  keep_freed_tensor_memory(); // as troupe-node, in both processes
  auto options = parse_arguments(argc, argv);
  if (!options)
    return 2;
  if (options->tls && !prepare_tls())
    return 1;
  pid_t child = 0;
  uint16_t ports[3] = {0, 0, 0};
  if (!start_server(options->tls, child, ports))
    return 1;
  int exit_code = 0;
  {
    node_cfg cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor chief{sys};
    client c;
    c.tls = options->tls;
    if (!connect_client(sys, chief, ports, c))
      return 1;
    bool throughput = measure_throughput(sys, c, options->rounds_40mb);
    bool latency = measure_round_trips(chief, c, options->rounds_40mb);
    exit_code = throughput && latency ? 0 : 1;
    stop_server(chief, c);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (options->tls) {
    std::remove((tls_dir + "/node.pem").c_str());
    std::remove((tls_dir + "/node.key").c_str());
    ::rmdir(tls_dir.c_str());
  }
  return exit_code;
}
