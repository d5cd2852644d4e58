#include "apps/serve/serve_endpoint.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>

#include "apps/http/newest_first_pool.hpp"
#include "apps/serve/prediction_rows.hpp"
#include "apps/serve/serve_metrics.hpp"

namespace troupe::serve {

namespace {

const char* json_type = "application/json";

std::string error_json(const std::string& what) {
  std::string out = "{\"error\":\"";
  for (char c : what) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"}\n";
}

// The body's length as its header announces it (0: none, or not a number).
uint64_t announced_length(const httplib::Request& req) {
  auto text = req.get_header_value("Content-Length");
  char* end = nullptr;
  auto n = std::strtoull(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' ? 0 : n;
}

// The network of the model served, one per server thread (a network keeps
// its work space), built again when a base brings another card.
model& network_for(const served_model& served, uint64_t generation) {
  thread_local uint64_t built_for = ~uint64_t{0};
  thread_local std::unique_ptr<model> net;
  if (!net || built_for != generation) {
    net = network_of(served.model.card, "model.json");
    built_for = generation;
  }
  return *net;
}

} // namespace

struct serve_endpoint::impl {
  serve_settings settings;
  model_versions* versions = nullptr;
  metrics::registry* registry = nullptr;
  std::unique_ptr<serve_metrics> counters;
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> ended{false};
  int bound_port = 0;

  void answer(httplib::Response& res, const std::string& path, int code, std::string body,
              int64_t version = -1) {
    res.status = code;
    if (version >= 0)
      res.set_header("X-Troupe-Version", std::to_string(version));
    res.set_content(std::move(body), json_type);
    serve_metrics::requests(*registry, path, code).add();
  }

  void predict(const std::string& body, httplib::Response& res) {
    auto started = std::chrono::steady_clock::now();
    auto generation = versions->generation();
    auto served = versions->current();
    if (!served)
      return answer(res, "/v1/predict", 503, error_json("no model is loaded yet"));
    try {
      auto b = read_rows(body, served->model.card);
      tensor outputs;
      predict_batch(network_for(*served, generation), served->model, b, outputs);
      counters->predictions.add(b.size());
      answer(res, "/v1/predict", 200,
             answer_json(served->model.card, outputs, b.size(), served->version,
                         served->model.card.step),
             served->version);
      counters->predict_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    } catch (const request_error& e) {
      answer(res, "/v1/predict", 400, error_json(e.what()), served->version);
    }
  }

  void version(httplib::Response& res) {
    auto served = versions->current();
    auto v = served ? served->version : -1;
    answer(res, "/v1/version", 200,
           "{\"version\":" + std::to_string(v)
             + ",\"step\":" + std::to_string(served ? served->model.card.step : -1)
             + ",\"newest_on_disk\":" + std::to_string(versions->newest_on_disk())
             + ",\"pinned\":" + (versions->pinned() ? "true" : "false") + "}\n",
           v);
  }

  void rollback(const httplib::Request& req, httplib::Response& res) {
    int64_t target = -1;
    try {
      target = std::stoll(req.get_param_value("version"));
    } catch (const std::exception&) {
      return answer(res, "/v1/rollback", 400,
                    error_json("name the version: POST /v1/rollback?version=V"));
    }
    try {
      versions->pin(target);
      counters->last_update.set(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
      version(res);
    } catch (const std::exception& e) {
      answer(res, "/v1/rollback", 409, error_json(e.what()));
    }
  }

  void routes() {
    // Read through a content reader: a body sent as a form (curl -d's
    // default type) is then not parsed as one, and not held to httplib's
    // 8 KiB limit on forms.
    server.Post("/v1/predict", [this](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& read) {
      if (announced_length(req) > settings.max_body) {
        res.set_header("Connection", "close"); // the body is never read
        return answer(res, "/v1/predict", 413,
                      error_json("the body is larger than the limit of "
                                 + std::to_string(settings.max_body) + " bytes (--max-body)"));
      }
      std::string body;
      read([&body](const char* data, size_t n) {
        body.append(data, n);
        return true;
      });
      predict(body, res);
    });
    server.Get("/v1/version",
               [this](const httplib::Request&, httplib::Response& res) { version(res); });
    server.Post("/v1/rollback", [this](const httplib::Request& req, httplib::Response& res) {
      rollback(req, res);
    });
    server.Post("/v1/follow", [this](const httplib::Request&, httplib::Response& res) {
      versions->follow();
      version(res);
    });
    server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      answer(res, "/healthz", 200, "{\"alive\":true}\n");
    });
    server.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      auto served = versions->current();
      answer(res, "/readyz", served ? 200 : 503,
             served ? "{\"ready\":true,\"version\":" + std::to_string(served->version) + "}\n"
                    : error_json("no model is loaded yet"));
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(registry->render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    // A known path with another method: 405 naming the one it takes.
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      bool post = req.path == "/v1/predict" || req.path == "/v1/rollback"
                  || req.path == "/v1/follow";
      bool get = req.path == "/v1/version" || req.path == "/healthz" || req.path == "/readyz"
                 || req.path == "/metrics";
      bool fits = (post && req.method == "POST")
                  || (get && (req.method == "GET" || req.method == "HEAD")) || (!post && !get);
      if (fits)
        return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("Allow", post ? "POST" : "GET, HEAD");
      answer(res, req.path, 405, error_json(req.path + " takes " + (post ? "POST" : "GET")));
      return httplib::Server::HandlerResponse::Handled;
    });
    // What no handler answered (404, 413): the handlers' own errors are
    // answered and counted already.
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty())
        return;
      if (res.status == 404)
        res.set_content(error_json("no such path: " + req.path
                                   + " (POST /v1/predict, GET /v1/version, /healthz, /readyz, "
                                     "/metrics)"),
                        json_type);
      else if (res.status == 413)
        res.set_content(error_json("the body is larger than the limit of "
                                   + std::to_string(settings.max_body) + " bytes (--max-body)"),
                        json_type);
      serve_metrics::requests(*registry, res.status == 404 ? "other" : req.path, res.status).add();
    });
  }
};

serve_endpoint::serve_endpoint(serve_settings settings, model_versions& versions,
                               metrics::registry& registry)
  : impl_(std::make_unique<impl>()) {
  auto& i = *impl_;
  i.settings = std::move(settings);
  i.versions = &versions;
  i.registry = &registry;
  i.counters = std::make_unique<serve_metrics>(registry);
  auto now = [&versions](auto read) {
    return [&versions, read] {
      auto served = versions.current();
      return served ? read(*served) : -1.0;
    };
  };
  registry.set_callback_gauge("troupe_serve_version", "The version of the model served",
                              now([](const served_model& m) { return double(m.version); }));
  registry.set_callback_gauge("troupe_serve_step", "Global steps the model served was trained",
                              now([](const served_model& m) { return double(m.model.card.step); }));
  registry.set_callback_gauge(
    "troupe_serve_rows", "Rows of the model served's embedding table",
    now([](const served_model& m) { return m.model.table ? double(m.model.table->rows()) : 0.0; }));
  auto& server = i.server;
  auto threads = i.settings.threads;
  server.new_task_queue = [threads] { return new http::newest_first_pool(threads); };
  server.set_read_timeout(static_cast<time_t>(i.settings.read_timeout.count()), 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_timeout(5);
  server.set_payload_max_length(i.settings.max_body);
  // An answer goes out in two writes (head, body): without TCP_NODELAY,
  // Nagle's algorithm and the client's delayed ACK hold the second ~40 ms.
  server.set_tcp_nodelay(true);
  // Not httplib's default SO_REUSEPORT: a second server on the port must fail.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  i.routes();
  if (i.settings.port == 0)
    i.bound_port = server.bind_to_any_port(i.settings.address);
  else
    i.bound_port = server.bind_to_port(i.settings.address, i.settings.port) ? i.settings.port : -1;
  if (i.bound_port <= 0)
    throw std::runtime_error("cannot listen on " + i.settings.address + ":"
                             + std::to_string(i.settings.port)
                             + " (in use, or not an address of this host): choose --port or "
                               "--address");
  i.thread = std::thread([this] {
    impl_->server.listen_after_bind();
    impl_->ended = true;
  });
  // stop() before the loop runs would be lost, and the destructor's join wait forever.
  while (!server.is_running() && !i.ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

serve_endpoint::~serve_endpoint() {
  impl_->server.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

uint16_t serve_endpoint::port() const {
  return static_cast<uint16_t>(impl_->bound_port);
}

std::string serve_endpoint::url() const {
  auto& a = impl_->settings.address;
  auto host = a.find(':') != std::string::npos ? "[" + a + "]" : a;
  return "http://" + host + ":" + std::to_string(port());
}

} // namespace troupe::serve
