// The metrics port: what it answers, what it refuses, and that silent
// connections and huge requests cost it nothing lasting.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <thread>

#include <caf/all.hpp>
#include <httplib.h>

#include "actors/metrics/registry.hpp"
#include "apps/node/metrics_endpoint.hpp"
#include "apps/node/task_endpoint.hpp"
#include "tests/support/identity_files.hpp"
#include "tests/support/loopback.hpp"

using namespace troupe;
using namespace troupe::node;

namespace {

uint16_t free_port() {
  testing::loopback_listener probe;
  return probe.port;
}

struct served {
  metrics::registry source;
  std::atomic<bool> alive{true};
  uint16_t port = free_port();
  std::unique_ptr<metrics_endpoint> endpoint;

  served() {
    endpoint_settings s;
    s.address = "127.0.0.1";
    s.port = port;
    s.alive = [this] { return alive.load(); };
    source.get_counter("troupe_pushes_total", "pushes", {{"shard", "0"}}).add(7);
    endpoint = std::make_unique<metrics_endpoint>(std::move(s), source);
  }

  httplib::Client client() const {
    httplib::Client c{"127.0.0.1", port};
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    return c;
  }
};

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace

BOOST_AUTO_TEST_CASE(metrics_are_served_in_prometheus_text_format) {
  served s;
  BOOST_TEST(s.endpoint->url() == "http://127.0.0.1:" + std::to_string(s.port) + "/metrics");
  auto res = s.client().Get("/metrics");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
  BOOST_TEST(res->get_header_value("Content-Type").find("text/plain; version=0.0.4")
             != std::string::npos);
  BOOST_TEST(res->body.find("troupe_pushes_total{shard=\"0\"} 7\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(healthz_follows_whether_the_actors_answer) {
  served s;
  auto res = s.client().Get("/healthz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
  s.alive = false;
  res = s.client().Get("/healthz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 503);
}

BOOST_AUTO_TEST_CASE(readyz_waits_for_every_task_of_the_process) {
  served s;
  auto res = s.client().Get("/readyz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 503); // no task yet
  auto& ps = s.source.get_gauge("troupe_ready", "ready", {{"task", "ps:0"}});
  auto& worker = s.source.get_gauge("troupe_ready", "ready", {{"task", "worker:1"}});
  ps.set(1);
  res = s.client().Get("/readyz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 503);
  BOOST_TEST(res->body == "worker:1 is not ready\n");
  worker.set(1);
  res = s.client().Get("/readyz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
}

BOOST_AUTO_TEST_CASE(only_get_on_known_paths_is_answered) {
  served s;
  auto c = s.client();
  auto res = c.Get("/other");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 404);
  res = c.Post("/metrics", "x", "text/plain");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 405);
  res = c.Delete("/readyz");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 405);
}

BOOST_AUTO_TEST_CASE(a_request_of_a_gigabyte_is_refused_without_reading_it) {
  served s;
  int fd = connect_to(s.port);
  BOOST_REQUIRE(fd >= 0);
  std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n"
                     + std::string(65536, 'a');
  BOOST_REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) > 0);
  std::string answer(4096, '\0');
  timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  auto n = ::recv(fd, answer.data(), answer.size(), 0);
  ::close(fd);
  BOOST_REQUIRE(n > 0);
  BOOST_TEST(answer.substr(0, 12) == "HTTP/1.1 413");
  // A request line of megabytes, without an end: refused too.
  fd = connect_to(s.port);
  BOOST_REQUIRE(fd >= 0);
  std::string line = "GET /" + std::string(1 << 20, 'a');
  ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  n = ::recv(fd, answer.data(), answer.size(), 0);
  ::close(fd);
  BOOST_TEST(n >= 0); // an answer (414 or 400) or the connection closed, within the timeout
  auto res = s.client().Get("/metrics");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
}

BOOST_AUTO_TEST_CASE(a_scrape_is_answered_behind_a_thousand_silent_connections) {
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 4096));
  ::setrlimit(RLIMIT_NOFILE, &files);
  BOOST_REQUIRE_MESSAGE(files.rlim_cur >= 2200, "needs 2,200 file descriptors");
  served s;
  std::vector<int> silent;
  for (int i = 0; i < 1000; ++i) {
    int fd = connect_to(s.port);
    BOOST_REQUIRE(fd >= 0);
    silent.push_back(fd);
  }
  auto start = std::chrono::steady_clock::now();
  auto res = s.client().Get("/metrics");
  auto waited = std::chrono::steady_clock::now() - start;
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
  // Served newest first: about one read timeout (1 s) behind the silent ones.
  auto seconds = std::chrono::duration<double>(waited).count();
  BOOST_TEST_MESSAGE("a scrape behind 1000 silent connections: " << seconds << " s");
  BOOST_TEST(seconds < 4.0); // first in, first out would take 1000 / 4 threads x 1 s
  for (int fd : silent)
    ::close(fd);
  res = s.client().Get("/metrics");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
}

BOOST_AUTO_TEST_CASE(a_port_in_use_is_named_with_the_fix) {
  served s;
  endpoint_settings again;
  again.address = "127.0.0.1";
  again.port = s.port;
  metrics::registry other;
  try {
    metrics_endpoint second{again, other};
    BOOST_FAIL("a second endpoint on the same port");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("metrics.port") != std::string::npos);
  }
}

// Under [openssl] the port is mutual TLS: a scraper with a certificate of
// the cluster CA reads it, one without, or with another CA's, reads nothing.
BOOST_AUTO_TEST_CASE(under_tls_only_a_certificate_of_the_cluster_ca_reads_metrics) {
  testing::identity_files cluster{"troupe-cluster"};
  testing::identity_files stranger{"troupe-stranger"};
  metrics::registry source;
  source.get_gauge("troupe_global_step", "step").set(42);
  endpoint_settings s;
  s.address = "127.0.0.1";
  s.port = free_port();
  s.tls = endpoint_tls{cluster.files.certificate, cluster.files.key, cluster.files.certificate, ""};
  metrics_endpoint endpoint{s, source};
  BOOST_TEST(endpoint.url().rfind("https://", 0) == 0);
  auto scrape = [&](const testing::identity_files* as) {
    auto client = as ? httplib::SSLClient("127.0.0.1", s.port, as->files.certificate, as->files.key)
                     : httplib::SSLClient("127.0.0.1", s.port);
    client.enable_server_certificate_verification(
      false); // the server's identity is not tested here
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(2, 0);
    return client.Get("/metrics");
  };
  auto member = scrape(&cluster);
  BOOST_REQUIRE(member);
  BOOST_TEST(member->status == 200);
  BOOST_TEST(member->body.find("troupe_global_step 42") != std::string::npos);
  BOOST_TEST(!scrape(nullptr));
  BOOST_TEST(!scrape(&stranger));
  // Plain HTTP to a TLS port gets no metrics either.
  httplib::Client plain{"127.0.0.1", s.port};
  plain.set_read_timeout(2, 0);
  auto res = plain.Get("/metrics");
  BOOST_TEST((!res || res->status != 200));
}

// /healthz asks the process's scheduler, not a task's actor: a shard busy
// for seconds (restoring a large checkpoint) does not fail its liveness probe.
BOOST_AUTO_TEST_CASE(a_busy_actor_does_not_fail_the_liveness_probe) {
  node_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  node_setup setup;
  setup.metrics = host_port{"127.0.0.1", free_port()};
  task_endpoint endpoint{sys, cfg, setup};
  auto busy = sys.spawn([]() -> caf::behavior {
    return {[](int32_t) { std::this_thread::sleep_for(std::chrono::seconds(3)); }};
  });
  caf::anon_send(busy, int32_t{1});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  httplib::Client c{"127.0.0.1", setup.metrics->port};
  c.set_read_timeout(5, 0);
  auto start = std::chrono::steady_clock::now();
  auto res = c.Get("/healthz");
  auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 200);
  BOOST_TEST(waited < 1.0, "answered in " << waited << " s while an actor was busy");
  caf::anon_send_exit(busy, caf::exit_reason::kill);
}
