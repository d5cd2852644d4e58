#include "apps/node/metrics_endpoint.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <httplib.h>

#include "apps/http/newest_first_pool.hpp"

namespace troupe::node {

namespace {

constexpr size_t serving_threads = 4;
constexpr size_t max_request_body = 1024;

std::unique_ptr<httplib::Server> make_server(const endpoint_settings& s) {
  if (!s.tls)
    return std::make_unique<httplib::Server>();
  auto& t = *s.tls;
  auto server = std::make_unique<httplib::SSLServer>(
    t.certificate.c_str(), t.key.c_str(), t.ca_file.c_str(), nullptr,
    t.passphrase.empty() ? nullptr : t.passphrase.c_str());
  if (!server->is_valid())
    throw std::runtime_error("the metrics port cannot use the [openssl] certificate, key and "
                             "cafile (they load for the cluster port: check their permissions)");
  return server;
}

} // namespace

std::pair<bool, std::string> readiness_of(const metrics::registry& source) {
  auto tasks = source.gauge_values("troupe_ready");
  if (tasks.empty())
    return {false, "no task has started yet\n"};
  std::string waiting;
  for (auto& [labels, value] : tasks)
    if (value != 1)
      for (auto& [name, task] : labels)
        if (name == "task")
          waiting += task + " is not ready\n";
  return {waiting.empty(), waiting.empty() ? "ready\n" : waiting};
}

struct metrics_endpoint::impl {
  endpoint_settings settings;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::atomic<bool> ended{false};
};

metrics_endpoint::metrics_endpoint(endpoint_settings settings, metrics::registry& source)
  : impl_(std::make_unique<impl>()) {
  impl_->settings = std::move(settings);
  auto& s = impl_->settings;
  impl_->server = make_server(s);
  auto& server = *impl_->server;
  server.new_task_queue = [] { return new http::newest_first_pool(serving_threads); };
  server.set_read_timeout(1, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_timeout(2);
  server.set_keep_alive_max_count(100);
  server.set_payload_max_length(max_request_body);
  // Address reuse for a restarted task, but not port sharing (httplib's
  // default adds SO_REUSEPORT): a second task on the port must fail.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET, HEAD");
      res.set_content("only GET /metrics, /healthz and /readyz\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A GET has no body: one announced is not read, and the connection ends.
    if (req.has_header("Transfer-Encoding")
        || req.get_header_value<uint64_t>("Content-Length") > 0) {
      res.status = 413;
      res.set_header("Connection", "close");
      res.set_content("a GET carries no body\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/metrics", [&source](const httplib::Request&, httplib::Response& res) {
    res.set_content(source.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    bool alive = !impl_->settings.alive || impl_->settings.alive();
    res.status = alive ? 200 : 503;
    res.set_content(alive ? "alive\n" : "the process's actors do not answer\n", "text/plain");
  });
  server.Get("/readyz", [&source](const httplib::Request&, httplib::Response& res) {
    auto [ready, text] = readiness_of(source);
    res.status = ready ? 200 : 503;
    res.set_content(text, "text/plain");
  });
  if (!server.bind_to_port(s.address, s.port))
    throw std::runtime_error("cannot listen on " + s.address + ":" + std::to_string(s.port)
                             + " (in use, or not an address of this host): set metrics.port "
                               "(0: no metrics port) or metrics.address");
  impl_->thread = std::thread([this] {
    impl_->server->listen_after_bind();
    impl_->ended = true;
  });
  // stop() before the loop runs would be lost, and the destructor's join wait forever.
  while (!server.is_running() && !impl_->ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

metrics_endpoint::~metrics_endpoint() {
  impl_->server->stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::string metrics_endpoint::url() const {
  auto& s = impl_->settings;
  auto host = s.address.find(':') != std::string::npos ? "[" + s.address + "]" : s.address;
  return std::string(s.tls ? "https" : "http") + "://" + host + ":" + std::to_string(s.port)
         + "/metrics";
}

} // namespace troupe::node
