// troupe-node: one binary for every task. With --job_name/--task_index it runs
// one task of the cluster in caf-application.conf; without, every task in
// this process (the embedded default when there is no config file either).
// Exit codes: 0 training finished, 1 runtime failure, 2 configuration error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_source.hpp"
#include "actors/cluster.hpp"
#include "actors/net/connect_deadline.hpp"
#include "actors/net/connection_warden.hpp"
#include "actors/protocol/basp_guard.hpp"
#include "actors/protocol/protocol.hpp"
#include "apps/evaluator_job.hpp"
#include "config/node/node_config.hpp"
#include "gpu/backend.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/memory_policy.hpp"
#include "tensor/export/model_export.hpp"

using namespace troupe;

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_config = 2;

void setup_logging(const std::string& who) {
  auto logger = spdlog::stderr_color_mt("troupe");
  logger->set_pattern("[%H:%M:%S.%e] [" + who + "] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
}

// Heartbeats make a frozen or vanished peer visible (CAF 0.17 disables them
// by default); every node must send them, or idle peers drop each other.
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

// How a listening task treats connections that CAF never times out: closed
// after twice the connection timeout in silence, at most max_connections,
// and never so many that the process runs out of descriptors.
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

// Watches the port a task listens on, while it lives.
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

// SIGTERM (a preemption, Kubernetes' normal stop): the chief saves a
// checkpoint and stops the cluster. Other tasks keep the default action and
// die at once, which the others treat as a loss.
volatile std::sig_atomic_t sigterm_received = 0;

void on_sigterm(int) {
  sigterm_received = 1;
}

// Blocks until the actor behind `handle` has terminated; returns its reason.
template <class Handle>
caf::error wait_for(caf::actor_system& sys, const Handle& handle) {
  caf::scoped_actor self{sys};
  self->monitor(handle);
  caf::error reason;
  self->receive([&](const caf::down_msg& msg) { reason = msg.reason; });
  return reason;
}

// Connects to a published actor of type Handle with retry and backoff for
// `within` (cluster.connect-timeout at start, cluster.recovery-timeout when
// a peer is lost), then checks the protocol version with a hello.
template <class Handle>
caf::expected<Handle> connect_to(caf::actor_system& sys, const node_setup& setup,
                                 const std::string& what, const host_port& address,
                                 std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  auto backoff = std::chrono::milliseconds(100);
  caf::error last;
  // A chief told to stop while it waits (Kubernetes' grace period runs) stops waiting.
  auto stopped = [&] {
    return make_error({errc::training_stopped, "stopped by SIGTERM while waiting for the " + what
                                                 + " at " + address.to_string()});
  };
  for (;;) {
    if (sigterm_received)
      return stopped();
    auto handle = setup.tls ? caf::openssl::remote_actor<Handle>(sys, address.host, address.port)
                            : sys.middleman().remote_actor<Handle>(address.host, address.port);
    if (handle) {
      // Right after a peer died, CAF may still hand out the dead one's
      // proxy (its cache is cleared asynchronously): a hello that is not
      // answered within 3 s means "try again", not "give up".
      auto wait = std::min(std::chrono::milliseconds(3000), setup.runtime.request_timeout);
      caf::scoped_actor self{sys};
      caf::expected<Handle> result{caf::sec::request_timeout};
      self
        ->request(*handle, wait, hello_atom::value, protocol_version,
                  std::string(name_of(setup.job)), setup.task)
        .receive([&](uint32_t) { result = *handle; },
                 [&](caf::error& err) { result = std::move(err); });
      if (result || result.error().category() == caf::atom("troupe"))
        return result; // connected, or refused (another protocol version)
      last = result.error();
    } else {
      last = handle.error();
    }
    if (last == caf::sec::unexpected_actor_messaging_interface)
      return caf::make_error(caf::sec::unexpected_actor_messaging_interface,
                             what + " at " + address.to_string() + " is not a Troupe " + what
                               + " of this release");
    if (std::chrono::steady_clock::now() + backoff > deadline)
      break;
    spdlog::debug("waiting for {} at {}: {}", what, address.to_string(), sys.render(last));
    for (auto slept = std::chrono::milliseconds(0); slept < backoff && !sigterm_received;
         slept += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    backoff = std::min(backoff * 3 / 2, std::chrono::milliseconds(1000));
  }
  return caf::make_error(caf::sec::cannot_connect_to_node,
                         "no " + what + " reachable at " + address.to_string() + " within "
                           + std::to_string(within.count()) + " ms: " + sys.render(last)
                           + "; is that task running and listening there?");
}

template <class Handle>
bool publish(caf::actor_system& sys, const node_setup& setup, const Handle& handle,
             const host_port& address) {
  auto port = setup.tls ? caf::openssl::publish(handle, address.port, address.host.c_str(), true)
                        : sys.middleman().publish(handle, address.port, address.host.c_str(), true);
  if (!port) {
    spdlog::error("cannot listen on {}: {}; is the port in use or the host not an address of "
                  "this machine?",
                  address.to_string(), sys.render(port.error()));
    return false;
  }
  spdlog::info("listening on {}{}", address.to_string(), setup.tls ? " (mutual TLS)" : "");
  return true;
}

// Over plain TCP anyone who reaches a port can join: say so when the cluster
// spans hosts.
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
// before allocating for it. Returns the model's bytes (0: not known here).
uint64_t limit_tensors_to_the_model(const training_settings& train) {
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
  set_max_wire_elements(largest);
  set_max_frame_bytes(total);
  return total;
}

// The largest BASP message of a run carries every variable once (a shard's
// init, a pull or push of all it holds), and a node receives at most one
// such message per peer at a time: a frame announcing more, or more in
// all, is a stranger's and costs it the connection (actors/protocol/basp_guard).
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

// One connection attempt waits at most as long as TCP's first retransmission
// (actors/net/connect_deadline.hpp), so that a task restarting at the same
// name is reached within about a second of listening.
void bound_connects() {
  if (auto problem = connect_deadline_problem(); !problem.empty()) {
    spdlog::warn("connection attempts are not bounded: {}", problem);
    return;
  }
  set_connect_deadline(std::chrono::milliseconds(1000));
}

// How this task reaches a lost peer again: at the same address, retrying
// for up to `within`.
peer_reconnect reconnect_to_peers(caf::actor_system& sys, const node_setup& setup) {
  peer_reconnect out;
  out.chief = [&sys, setup](std::chrono::milliseconds within) {
    return connect_to<chief_actor>(sys, setup, "chief", setup.cluster.chief[0], within);
  };
  out.shard = [&sys, setup](int32_t shard, std::chrono::milliseconds within) {
    return connect_to<ps_shard_actor>(sys, setup, "ps shard",
                                      setup.cluster.ps[static_cast<size_t>(shard)], within);
  };
  return out;
}

// Until `chief` ends: tells it when SIGTERM arrives (a signal handler may not
// send messages itself).
class sigterm_relay {
public:
  sigterm_relay(caf::actor_system& sys, const chief_actor& chief)
    : thread_([this, &sys, target = caf::actor_cast<caf::actor>(chief)] {
        while (!done_) {
          if (sigterm_received) {
            caf::scoped_actor relay{sys};
            relay->send(target, stop_atom::value);
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }) {}
  ~sigterm_relay() {
    done_ = true;
    thread_.join();
  }

private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The run is over and its exit code known; CAF's shutdown then waits for
// every actor, and a connect to a peer that accepts but never answers (a
// frozen process) never returns. Give the shutdown 10 s, then exit anyway.
void exit_if_shutdown_hangs(int code) {
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    spdlog::warn("shutdown still waits for a peer that does not answer; exiting ({})", code);
    spdlog::default_logger()->flush();
    std::cout.flush();
    std::_Exit(code);
  }).detach();
}

int exit_code_of(const caf::error& reason) {
  return !reason || reason == caf::exit_reason::normal ? exit_ok : exit_failure;
}

// Written once, at the end. stdout may be a pipe whose reader has gone
// (troupe-node | head -3): SIGPIPE is ignored, so the write fails instead of
// killing the node, and the line goes to the log instead.
void print_final(const training_result& r) {
  auto text = (r.traffic.empty() ? std::string() : r.traffic_json() + "\n") + r.to_json() + "\n";
  errno = 0;
  std::cout << text << std::flush;
  if (!std::cout)
    spdlog::error("the final line could not be written to stdout ({}); it was: {}",
                  errno ? std::strerror(errno) : "stream error", r.to_json());
}

// The run's model card: the network, its input, classes, labels and
// normalisation (tensor/export/model_export.hpp), at `step`.
model_card card_of(const node_setup& setup, int64_t step) {
  auto net = make_model(setup.train.model, model_options_of(setup.train));
  return describe_model(setup.train.model, *net, setup.data->train.get(), step);
}

// The data as the run sees it: logged, and saved with the run
// (<log-dir>/data.json, and the model card <log-dir>/model.json that
// troupe-export reads beside the checkpoints) so that evaluation and
// prediction later transform examples the same way. Returns the final
// line's summary.
std::string announce_data(const node_setup& setup) {
  auto& catalog = *setup.data;
  for (auto& line : describe_lines(catalog))
    spdlog::info("{}", line);
  auto& dir = setup.train.checkpoint.log_dir;
  if (!dir.empty()) {
    try {
      std::filesystem::create_directories(dir);
      write_file_atomically(dir + "/data.json", describe_json(catalog) + "\n");
      write_file_atomically(dir + "/model.json", json::write(card_of(setup, 0).to_json()) + "\n");
    } catch (const std::exception& e) {
      spdlog::warn("could not save the data's and the model's description in {}: {}", dir,
                   e.what());
    }
  }
  return data_summary_json(catalog);
}

// A run that ended well leaves its model in <log-dir>/export, ready for
// troupe-predict and troupe-eval.
void export_model(const node_setup& setup, const training_result& result) {
  auto& dir = setup.train.checkpoint.log_dir;
  if (dir.empty() || !result.ok || result.values.empty())
    return;
  try {
    auto net = make_model(setup.train.model, model_options_of(setup.train));
    write_model_export(dir + "/export", card_of(setup, result.global_step), net->variables(),
                       result.values);
    spdlog::info("model exported to {}/export (model.safetensors, model.json)", dir);
  } catch (const std::exception& e) {
    spdlog::error("could not export the model to {}/export: {}", dir, e.what());
  }
}

int run_whole_cluster(caf::actor_system& sys, const node_setup& setup) {
  spdlog::info("whole cluster in this process: {} PS shard(s), {} worker(s), model {}, "
               "last_step {}{}",
               setup.cluster.ps.size(), setup.cluster.worker.size(), setup.train.model,
               setup.train.last_step, setup.embedded_defaults ? " (embedded defaults)" : "");
  auto summary = announce_data(setup);
  auto data = training_data_of(*setup.data);
  training_result result;
  auto cluster = spawn_local_cluster(
    sys, setup.train, setup.runtime, static_cast<int32_t>(setup.cluster.ps.size()),
    static_cast<int32_t>(setup.cluster.worker.size()), data,
    [&result](const training_result& r) { result = r; }, spawn_mode::detached, setup.restore_from);
  {
    sigterm_relay relay{sys, cluster.chief};
    wait_for(sys, cluster.chief);
  }
  result.data_json = summary;
  export_model(setup, result);
  print_final(result);
  return result.ok || result.preempted ? exit_ok : exit_failure;
}

// The bulk path of this task: on unless cluster.bulk-path = false, under
// the same mutual TLS as BASP when [openssl] is configured.
struct bulk_path {
  bool on = false;
  std::shared_ptr<const bulk::tls_context> tls;
};

// Null (logged) when the TLS files do not load: check_tls read them already,
// so only a file changed since can fail here.
std::optional<bulk_path> bulk_path_of(const node_config& cfg, const node_setup& setup) {
  bulk_path out{setup.runtime.bulk_path, nullptr};
  if (!out.on || !setup.tls)
    return out;
  maybe_failure error;
  out.tls = bulk::tls_context::make({cfg.openssl_certificate, cfg.openssl_key,
                                     cfg.openssl_passphrase, cfg.openssl_cafile,
                                     cfg.openssl_capath},
                                    error);
  if (!out.tls) {
    spdlog::error("{}", error ? error->message : "bulk path TLS failed");
    return std::nullopt;
  }
  return out;
}

// Where a worker (or the chief) opens the bulk path to each shard.
bulk_peers bulk_peers_of(const node_setup& setup, const bulk_path& bulk) {
  bulk_peers peers;
  if (bulk.on) {
    for (auto& address : setup.cluster.ps)
      peers.shard_hosts.push_back(address.host);
    peers.tls = bulk.tls;
  }
  return peers;
}

int run_ps(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
           const bulk_path& bulk) {
  if (!address_is_free(setup, setup.cluster.ps[setup.task]))
    return exit_failure;
  ps_shard_config config{setup.task, setup.train.optimizer, setup.runtime.connect_timeout,
                         setup.runtime.recovery_timeout};
  if (bulk.on) {
    config.bulk_host = setup.cluster.ps[setup.task].host;
    config.bulk_tls = bulk.tls;
  }
  ps_shard_actor shard = sys.spawn(ps_shard, config); // published without its timer
  if (!publish(sys, setup, shard, setup.cluster.ps[setup.task])) {
    // kill: the shard's exit handler ignores anonymous exit messages
    caf::anon_send_exit(shard, caf::exit_reason::kill);
    return exit_failure;
  }
  auto warden = guard_port(setup, limits, setup.cluster.ps[setup.task]);
  auto reason = wait_for(sys, shard);
  if (reason && reason != caf::exit_reason::normal)
    spdlog::error("ps shard ended: {}", describe(reason));
  return exit_code_of(reason);
}

// Every PS shard of the cluster, in task order; false (logged) if one is unreachable.
bool connect_shards(caf::actor_system& sys, const node_setup& setup,
                    std::vector<ps_shard_actor>& shards) {
  for (size_t i = 0; i < setup.cluster.ps.size(); ++i) {
    auto shard = connect_to<ps_shard_actor>(sys, setup, "ps shard", setup.cluster.ps[i],
                                            setup.runtime.connect_timeout);
    if (!shard) {
      spdlog::error("ps:{}: {}", i, describe(shard.error()));
      return false;
    }
    shards.push_back(*shard);
  }
  return true;
}

// The evaluators following this chief's checkpoints get the last one before
// the process ends: the source answers until each has been told that nothing
// newer will come (or has gone), for at most cluster.recovery-timeout.
void release_followers(caf::actor_system& sys, const node_setup& setup,
                       const checkpoint_source_actor& source) {
  if (!source)
    return;
  caf::scoped_actor self{sys};
  self->monitor(source);
  self->send(source, stop_atom::value);
  bool gone = false;
  self->receive([&](const caf::down_msg&) { gone = true; },
                caf::after(setup.runtime.recovery_timeout) >> [] {});
  if (!gone) {
    spdlog::warn("chief: an evaluator did not fetch the last checkpoint within "
                 "cluster.recovery-timeout; ending without it");
    self->send_exit(source, caf::exit_reason::user_shutdown);
  }
}

int run_chief(caf::actor_system& sys, const node_setup& setup, const warden_limits& limits,
              const bulk_path& bulk) {
  // Before it reaches any shard: a second start of the chief touches nothing.
  if (!address_is_free(setup, setup.cluster.chief[0]))
    return exit_failure;
  std::vector<ps_shard_actor> shards;
  if (!connect_shards(sys, setup, shards)) {
    if (!sigterm_received)
      return exit_failure;
    // Preempted before anything started: nothing to save, nothing to stop.
    training_result preempted;
    preempted.preempted = true;
    preempted.error = "stopped by SIGTERM while waiting for the ps tasks; nothing had started: "
                      "start the job again";
    spdlog::warn("chief: {}", preempted.error);
    print_final(preempted);
    return exit_ok;
  }
  auto summary = announce_data(setup);
  auto test = std::make_shared<const dataset>(load_all(setup.data->evaluation()));
  training_result result;
  checkpoint_source_actor checkpoints;
  if (!setup.train.checkpoint.log_dir.empty())
    checkpoints = spawn_checkpoint_source(sys, setup.train.checkpoint.log_dir);
  auto chief_handle = spawn_chief(
    sys, setup.train, setup.runtime, static_cast<int32_t>(setup.cluster.worker.size()), shards,
    test, [&result](const training_result& r) { result = r; }, spawn_mode::detached,
    setup.restore_from, reconnect_to_peers(sys, setup), bulk_peers_of(setup, bulk), checkpoints);
  if (!publish(sys, setup, chief_handle, setup.cluster.chief[0])) {
    // Lost a race for the port: its shards refuse a second chief's init.
    caf::anon_send_exit(chief_handle, caf::exit_reason::user_shutdown);
    if (checkpoints)
      caf::anon_send_exit(checkpoints, caf::exit_reason::user_shutdown);
    return exit_failure;
  }
  auto warden = guard_port(setup, limits, setup.cluster.chief[0]);
  {
    sigterm_relay relay{sys, chief_handle};
    wait_for(sys, chief_handle);
  }
  release_followers(sys, setup, checkpoints);
  result.data_json = summary;
  export_model(setup, result);
  print_final(result);
  return result.ok || result.preempted ? exit_ok : exit_failure;
}

int run_worker(caf::actor_system& sys, const node_setup& setup, const bulk_path& bulk) {
  auto chief_handle = connect_to<chief_actor>(sys, setup, "chief", setup.cluster.chief[0],
                                              setup.runtime.connect_timeout);
  if (!chief_handle) {
    spdlog::error("{}", describe(chief_handle.error()));
    return exit_failure;
  }
  std::vector<ps_shard_actor> shards;
  if (!connect_shards(sys, setup, shards))
    return exit_failure;
  auto train = setup.data->train;
  // Not published: nobody connects to a worker; the chief reaches it over the
  // connection the worker opened (its ready request).
  auto w = spawn_worker(sys, setup.task, static_cast<int32_t>(setup.cluster.worker.size()),
                        setup.train, setup.runtime, *chief_handle, shards, train,
                        spawn_mode::detached, reconnect_to_peers(sys, setup),
                        bulk_peers_of(setup, bulk));
  return exit_code_of(wait_for(sys, w));
}

} // namespace

// The process's peak resident memory (VmHWM), for operators sizing their
// machines (and the large-data test, which checks that streaming keeps a
// worker's memory bounded).
static void log_peak_memory() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) {
      auto kib = std::stoll(line.substr(6));
      spdlog::info("peak resident memory: {} MiB ({} KiB)", kib / 1024, kib);
      return;
    }
}

int main(int argc, char** argv) {
  // A closed stdout or stderr must not end a run (see print_final).
  std::signal(SIGPIPE, SIG_IGN);
  keep_freed_tensor_memory();
  node_config cfg;
  register_protocol(cfg);
  auto outcome = load_node_config(cfg, argc, argv);
  auto& setup = outcome.setup;
  switch (outcome.what) {
    case load_outcome::action::help:
      std::cout << help_text(cfg);
      return exit_ok;
    case load_outcome::action::fail:
      for (auto& e : outcome.errors)
        std::cerr << "troupe-node: configuration error: " << e << "\n";
      std::cerr << "troupe-node: nothing was started (exit code 2); see troupe-node --help\n";
      return exit_config;
    case load_outcome::action::dump_config:
      std::cout << dump_config(cfg, setup);
      return exit_ok;
    case load_outcome::action::run:
      break;
  }
  // A worker that cannot use its device stops here, before it joins.
  for (int32_t w = 0; w < static_cast<int32_t>(setup.cluster.worker.size()); ++w) {
    if (!setup.whole_cluster && !(setup.job == job_kind::worker && setup.task == w))
      continue;
    try {
      gpu::check_device(device_of(setup.train, w), {setup.train.gpu_memory_fraction});
    } catch (const std::exception& e) {
      std::cerr << "troupe-node: device error: worker:" << w << ": " << e.what() << "\n"
                << "troupe-node: nothing was started (exit code 2)\n";
      return exit_config;
    }
  }
  setup_logging(setup.name());
  if (setup.whole_cluster || setup.job == job_kind::chief)
    std::signal(SIGTERM, on_sigterm);
  for (auto& warning : setup.restore_warnings)
    spdlog::warn("checkpoint: {}", warning);
  for (auto& note : setup.restore_notes)
    spdlog::info("checkpoint: {}", note);
  warn_without_tls(setup);
  default_heartbeats(cfg);
  auto limits = connection_limits(cfg, setup);
  bound_connects();
  auto model_bytes = limit_tensors_to_the_model(setup.train);
  guard_frames(cfg, setup, model_bytes);
  if (!setup.whole_cluster && setup.job == job_kind::evaluator) {
    try {
      caf::actor_system sys{cfg};
      auto code = run_evaluator(sys, setup, model_bytes, reconnect_to_peers(sys, setup).chief);
      log_peak_memory();
      return code;
    } catch (const std::exception& e) {
      spdlog::error("evaluator: {}", e.what());
      return exit_failure;
    }
  }
  auto bulk = bulk_path_of(cfg, setup);
  if (!bulk)
    return exit_failure;
  try {
    caf::actor_system sys{cfg};
    int code = setup.whole_cluster            ? run_whole_cluster(sys, setup)
               : setup.job == job_kind::ps    ? run_ps(sys, setup, limits, *bulk)
               : setup.job == job_kind::chief ? run_chief(sys, setup, limits, *bulk)
                                              : run_worker(sys, setup, *bulk);
    log_peak_memory();
    exit_if_shutdown_hangs(code);
    return code; // the actor system shuts down here
  } catch (const data_error& e) {
    spdlog::error("data: {}", e.what());
    return exit_failure;
  } catch (const std::exception& e) {
    spdlog::error("fatal: {}", e.what());
    return exit_failure;
  }
}
