#include "apps/node/process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/net/connect_deadline.hpp"
#include "actors/protocol/basp_guard.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/wire.hpp"
#include "tensor/nn/model.hpp"

namespace troupe::node {

namespace {

volatile std::sig_atomic_t sigterm_received = 0;

void on_sigterm(int) {
  sigterm_received = 1;
}

} // namespace

void setup_logging(const std::string& who) {
  // Once per process, again for each task a process runs in turn (the
  // Python package's workers).
  auto logger = spdlog::get("troupe");
  if (!logger)
    logger = spdlog::stderr_color_mt("troupe");
  logger->set_pattern("[%H:%M:%S.%e] [" + who + "] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
}

void catch_sigterm() {
  std::signal(SIGTERM, on_sigterm);
}

void note_sigterm() {
  sigterm_received = 1;
}

bool sigterm_arrived() {
  return sigterm_received != 0;
}

struct sigterm_relay::impl {
  std::atomic<bool> done{false};
  std::thread thread;
};

sigterm_relay::sigterm_relay(caf::actor_system& sys, caf::actor target, caf::message what)
  : impl_(std::make_unique<impl>()) {
  impl_->thread = std::thread([state = impl_.get(), &sys, target, what] {
    while (!state->done) {
      if (sigterm_received) {
        caf::scoped_actor relay{sys};
        relay->send(target, what);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

sigterm_relay::~sigterm_relay() {
  impl_->done = true;
  impl_->thread.join();
}

void default_heartbeats(node_config& cfg) {
  auto& content = caf::content(cfg);
  auto set_default = [&](const std::string& key, caf::timespan value) {
    auto current = caf::get_if<caf::timespan>(&content, key);
    if (!current || current->count() == 0)
      cfg.set(key, value);
  };
  set_default("middleman.heartbeat-interval", std::chrono::seconds(1));
  set_default("middleman.connection-timeout", std::chrono::seconds(10));
}

// Closed after twice the connection timeout in silence, at most
// max_connections, and never so many that the process runs out of
// descriptors.
warden_limits connection_limits(const node_config& cfg, const node_setup& setup) {
  warden_limits limits;
  auto timeout = caf::get_or(caf::content(cfg), "middleman.connection-timeout",
                             caf::timespan{std::chrono::seconds(10)});
  limits.idle_timeout = 2 * std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  limits.max_connections = setup.max_connections;
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
    // Room for the process's own files, peers it connects to and logs.
    size_t room = files.rlim_cur > 128 ? static_cast<size_t>(files.rlim_cur) - 128 : 1;
    if (limits.max_connections > room) {
      spdlog::warn("cluster.max-connections = {} lowered to {}: the process may open only {} "
                   "files (ulimit -n)",
                   limits.max_connections, room, static_cast<size_t>(files.rlim_cur));
      limits.max_connections = room;
    }
  }
  return limits;
}

std::unique_ptr<connection_warden> guard_port(const node_setup& setup, const warden_limits& limits,
                                              const host_port& address) {
  if (auto problem = connection_warden_problem(); !problem.empty()) {
    spdlog::warn("idle connections are not closed: {}", problem);
    return nullptr;
  }
  std::vector<std::string> hosts;
  for (auto* job : {&setup.cluster.chief, &setup.cluster.ps, &setup.cluster.worker})
    for (auto& task : *job)
      hosts.push_back(task.host);
  spdlog::info("port {}: at most {} connections (cluster.max-connections); connections silent "
               "for {} ms are closed",
               address.port, limits.max_connections, limits.idle_timeout.count());
  return std::make_unique<connection_warden>(address.port, limits, hosts);
}

void warn_without_tls(const node_setup& setup) {
  if (setup.tls || setup.whole_cluster)
    return;
  for (auto* job : {&setup.cluster.chief, &setup.cluster.ps, &setup.cluster.worker})
    for (auto& task : *job)
      if (task.host.rfind("127.", 0) != 0 && task.host != "localhost" && task.host != "::1") {
        spdlog::warn("this cluster spans hosts over plain TCP: anyone who can reach its ports can "
                     "join, read and disturb the run; configure mutual TLS in [openssl] "
                     "(scripts/make-certs, docs/operations.md)");
        return;
      }
}

// A task whose address is taken is most likely running already (started
// twice, or another cluster on the same ports): it says so and touches
// nothing. A plain bind with address reuse fails only while another socket
// listens there.
bool address_is_free(const node_setup& setup, const host_port& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return true; // publish reports what goes wrong
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(address.port);
  bool taken = false;
  if (::inet_pton(AF_INET, address.host.c_str(), &addr.sin_addr) == 1)
    taken = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
            && errno == EADDRINUSE;
  ::close(fd);
  if (taken)
    spdlog::error("{}: {} is in use: is this task already running (started twice, or another "
                  "cluster on the same ports)? Nothing was started or touched",
                  setup.name(), address.to_string());
  return !taken;
}

// No tensor of this run is larger than the model's largest variable, so no
// tensor arriving from a peer may be either: the wire format refuses one
// before allocating for it.
uint64_t limit_tensors_to_the_model(const training_settings& train) {
  if (train.model == model_kind::declared) {
    spdlog::info("a declared model's shapes come from its workers' programs: tensors are "
                 "bounded by the default limit");
    return 0;
  }
  if (train.network.input.empty() || train.network.classes == 0) {
    spdlog::info("the model's shapes come from data this task does not read: tensors are "
                 "bounded by the default limit; give model.input and model.classes for a "
                 "tighter one");
    return 0;
  }
  auto net = make_model(train.model, model_options_of(train));
  size_t largest = 1;
  uint64_t total = 0;
  for (auto& v : net->variables()) {
    largest = std::max(largest, static_cast<size_t>(num_elements(v.shape)));
    total += static_cast<uint64_t>(num_elements(v.shape)) * sizeof(float);
  }
  // A pull or push of embedding rows: up to max-keys-per-request rows, each
  // with its key and count.
  for (auto& table : net->tables()) {
    auto keys = static_cast<uint64_t>(train.embedding.max_keys_per_request);
    largest = std::max(largest, static_cast<size_t>(keys * table.dim));
    total += keys * (table.dim * sizeof(float) + sizeof(int64_t) + sizeof(uint32_t));
  }
  set_max_wire_elements(largest);
  set_max_frame_bytes(total);
  return total;
}

// The largest BASP message of a run carries every variable once (a shard's
// init, a pull or push of all it holds), and a node receives at most one
// such message per peer at a time: a frame announcing more, or more in
// all, is a stranger's and costs it the connection.
void guard_frames(const node_config& cfg, const node_setup& setup, uint64_t model_bytes) {
  if (auto problem = basp_guard_problem(); !problem.empty()) {
    spdlog::warn("frames from peers are not checked before CAF decodes them: {}", problem);
    return;
  }
  basp_limits frames;
  if (model_bytes > 0)
    frames.max_message_bytes = model_bytes + (uint64_t{16} << 20);
  auto peers = setup.cluster.worker.size() + 2;
  frames.max_pending_bytes = frames.max_message_bytes * peers;
  guard_basp(cfg, frames);
}

// As long as TCP's first retransmission (actors/net/connect_deadline.hpp),
// so that a task restarting at the same name is reached within about a
// second of listening.
void bound_connects() {
  if (auto problem = connect_deadline_problem(); !problem.empty()) {
    spdlog::warn("connection attempts are not bounded: {}", problem);
    return;
  }
  set_connect_deadline(std::chrono::milliseconds(1000));
}

caf::error wait_for(caf::actor_system& sys, const caf::actor& actor) {
  caf::scoped_actor self{sys};
  self->monitor(actor);
  caf::error reason;
  self->receive([&](const caf::down_msg& msg) { reason = msg.reason; });
  return reason;
}

int exit_code_of(const caf::error& reason) {
  return exit_code(end_of(reason));
}

// CAF's shutdown waits for every actor, and a connect to a peer that accepts
// but never answers (a frozen process) never returns.
void exit_if_shutdown_hangs(int code) {
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    spdlog::warn("shutdown still waits for a peer that does not answer; exiting ({})", code);
    spdlog::default_logger()->flush();
    std::cout.flush();
    std::_Exit(code);
  }).detach();
}

// For operators sizing their machines (and the large-data test, which checks
// that streaming keeps a worker's memory bounded).
void log_peak_memory() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) {
      auto kib = std::stoll(line.substr(6));
      spdlog::info("peak resident memory: {} MiB ({} KiB)", kib / 1024, kib);
      return;
    }
}

} // namespace troupe::node
