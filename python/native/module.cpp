// troupe._native: the C++ side of the Python package. A Python task reads
// its configuration (caf-application.conf, TF_CONFIG, its command line)
// through the same loader and checks as troupe-node (config/node), so that
// a setting means one thing, and is refused with one message, in both.
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "config/node/node_config.hpp"

namespace py = pybind11;

namespace troupe {
namespace {

/// A configuration the loader refused: every problem, one a line, each
/// naming the key and the fix.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

py::list addresses(const std::vector<host_port>& tasks) {
  py::list out;
  for (auto& task : tasks)
    out.append(task.to_string());
  return out;
}

// What a task's configuration says, as the node would run it.
py::dict summary(const node_config& cfg, const node_setup& setup) {
  py::dict out;
  out["name"] = setup.whole_cluster
                  ? std::string("local")
                  : std::string(name_of(setup.job)) + ":" + std::to_string(setup.task);
  out["whole_cluster"] = setup.whole_cluster;
  out["embedded_defaults"] = setup.embedded_defaults;
  out["config_file"] = setup.config_file;
  out["job"] = std::string(name_of(setup.job));
  out["task"] = setup.task;
  out["tls"] = setup.tls;
  py::dict cluster;
  cluster["chief"] = addresses(setup.cluster.chief);
  cluster["ps"] = addresses(setup.cluster.ps);
  cluster["worker"] = addresses(setup.cluster.worker);
  out["cluster"] = cluster;
  out["model"] = std::string(name_of(setup.train.model));
  out["mode"] = std::string(name_of(setup.train.mode));
  out["batch_size"] = setup.train.batch_size;
  out["last_step"] = setup.train.last_step;
  out["seed"] = setup.train.seed;
  out["sources"] = setup.sources;
  out["effective"] = dump_config(cfg, setup);
  return out;
}

/// Loads and validates a task's configuration from `args` (troupe-node's
/// command line without the program name). Returns the summary, or for
/// --help the help text; throws config_error listing every problem.
py::object load_config(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s{"troupe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  node_config cfg;
  load_outcome outcome;
  {
    py::gil_scoped_release unlocked; // cataloguing the data can take a while
    outcome = load_node_config(cfg, static_cast<int>(argv.size()), argv.data());
  }
  switch (outcome.what) {
    case load_outcome::action::help:
      return py::str(help_text(cfg));
    case load_outcome::action::fail: {
      std::string text;
      for (auto& error : outcome.errors)
        text += (text.empty() ? "" : "\n") + error;
      throw config_error(text.empty() ? "the configuration was refused" : text);
    }
    case load_outcome::action::run:
    case load_outcome::action::dump_config:
      break;
  }
  return summary(cfg, outcome.setup);
}

} // namespace
} // namespace troupe

PYBIND11_MODULE(_native, m) {
  m.doc() = "Troupe's C++ runtime, for the troupe package (use troupe, not this module)";
  py::register_exception<troupe::config_error>(m, "ConfigError", PyExc_ValueError);
  m.def("load_config", &troupe::load_config, py::arg("args"),
        "A task's configuration loaded and validated as troupe-node does.");
}
