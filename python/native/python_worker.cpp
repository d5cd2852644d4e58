#include "python/native/python_worker.hpp"

#include <algorithm>

#include <caf/actor_system.hpp>
#include <spdlog/spdlog.h>

#include "actors/net/openssl_error_queue.hpp"
#include "actors/protocol/protocol.hpp"
#include "apps/node/peers.hpp"
#include "apps/node/process.hpp"
#include "apps/node/roles.hpp"
#include "apps/node/task_endpoint.hpp"

namespace troupe::python {

loaded_node load_node(const std::vector<std::string>& args, bool for_worker) {
  std::vector<std::string> argv_s{"troupe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  loaded_node out;
  out.cfg = std::make_unique<node_config>();
  register_protocol(*out.cfg);
  out.outcome = load_node_config(*out.cfg, static_cast<int>(argv.size()), argv.data());
  auto& outcome = out.outcome;
  if (outcome.what == load_outcome::action::help)
    throw config_error("--help is troupe-node's: run troupe-node --help");
  if (outcome.what == load_outcome::action::fail) {
    std::string text;
    for (auto& error : outcome.errors)
      text += (text.empty() ? "" : "\n") + error;
    throw config_error(text.empty() ? "the configuration was refused" : text);
  }
  auto& setup = outcome.setup;
  if (for_worker && (setup.whole_cluster || setup.job != job_kind::worker))
    throw config_error(
      "a Python worker is a worker task of a cluster, but the configuration "
      "names "
      + (setup.whole_cluster ? std::string("the whole cluster in one process") : setup.name())
      + ": give job=\"worker\" and its task (or TF_CONFIG naming one)");
  return out;
}

python_worker::python_worker(const std::vector<std::string>& args,
                             std::optional<model_declaration> declaration)
  : loaded_(load_node(args, true)) {
  auto& train = loaded_.outcome.setup.train;
  bool declared = train.model == model_kind::declared;
  if (declared != declaration.has_value())
    throw config_error(declared
                         ? "train.model = declared: the worker's program declares the "
                           "model (troupe.torch.worker(module, ...))"
                         : "the configuration's train.model is " + std::string(name_of(train.model))
                             + ": a module's declaration needs train.model = \"declared\"");
  if (declared) {
    try {
      declared_ = std::make_shared<program_model>(std::move(*declaration), handoff_);
    } catch (const std::exception& e) {
      throw config_error(e.what());
    }
    variables_ = declared_->variables();
    tables_ = declared_->tables();
  } else {
    auto net = make_model(train.model, model_options_of(train));
    variables_ = net->variables();
    tables_ = net->tables();
    if (setup().data)
      keys_ = setup().data->train->keys;
  }
  if (auto problem = openssl_error_queue_problem(); setup().tls && !problem.empty())
    throw config_error("TLS is not safe in this process: " + problem);
}

python_worker::~python_worker() {
  stop("the Python worker was closed");
  if (thread_.joinable())
    thread_.join();
}

void python_worker::start() {
  if (thread_.joinable())
    return;
  thread_ = std::thread([this] {
    int code = node::exit_failure;
    try {
      code = run();
    } catch (const std::exception& e) {
      spdlog::error("{}: {}", setup().name(), e.what());
    }
    handoff_->close("the run is over for " + setup().name());
    std::lock_guard<std::mutex> lock(mutex_);
    exit_code_ = code;
    finished_.notify_all();
  });
}

// troupe-node's worker path (apps/troupe_node.cpp) without the signal
// handling, which is the Python process's own.
int python_worker::run() {
  auto& cfg = *loaded_.cfg;
  auto& setup = loaded_.outcome.setup;
  node::setup_logging(setup.name());
  // Its errors also kept for the Python exception that ends a failed run.
  errors_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(3);
  errors_->set_level(spdlog::level::err);
  errors_->set_pattern("%v");
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove_if(sinks.begin(), sinks.end(),
                             [](auto& sink) {
                               return dynamic_cast<spdlog::sinks::ringbuffer_sink_mt*>(sink.get());
                             }),
              sinks.end());
  sinks.push_back(errors_);
  node::warn_without_tls(setup);
  node::default_heartbeats(cfg);
  node::bound_connects();
  auto model_bytes = node::limit_tensors_to_the_model(setup.train);
  node::guard_frames(cfg, setup, model_bytes);
  auto bulk = node::bulk_path_of(cfg, setup);
  if (!bulk)
    return node::exit_failure;
  caf::actor_system sys{cfg};
  node::task_endpoint endpoint{sys, cfg, setup}; // /metrics and the probes, as troupe-node's
  auto handoff = handoff_;
  auto declared = declared_;
  return node::run_worker(
    sys, setup, *bulk, [handoff, declared](std::shared_ptr<model> net) -> std::shared_ptr<model> {
      if (declared)
        return declared;
      return std::make_shared<handed_off_model>(std::move(net), handoff);
    });
}

void python_worker::leave() {
  node::note_sigterm(); // run_worker's relay tells the worker actor
}

void python_worker::stop(const std::string& why) {
  handoff_->close(why);
}

std::vector<std::string> python_worker::errors() const {
  return errors_ ? errors_->last_formatted() : std::vector<std::string>{};
}

std::optional<int> python_worker::join(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!finished_.wait_for(lock, wait, [this] { return exit_code_.has_value(); }))
    return std::nullopt;
  lock.unlock();
  if (thread_.joinable())
    thread_.join();
  return exit_code_;
}

} // namespace troupe::python
