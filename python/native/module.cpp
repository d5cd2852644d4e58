// troupe._native: the C++ side of the Python package. A Python task reads
// its configuration through troupe-node's own loader and checks
// (config/node), and a Python worker is troupe-node's worker task with its
// compute handed to the Python thread (python_worker.hpp): a setting means
// one thing, and a step follows one set of rules, in both.
#include <cstring>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/native/python_worker.hpp"

namespace py = pybind11;

namespace troupe::python {
namespace {

py::list addresses(const std::vector<host_port>& tasks) {
  py::list out;
  for (auto& task : tasks)
    out.append(task.to_string());
  return out;
}

// What a task's configuration says, as the node would run it.
py::dict summary(const node_config& cfg, const node_setup& setup) {
  py::dict out;
  out["name"] = setup.name();
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

py::dict load_config(const std::vector<std::string>& args) {
  loaded_node loaded;
  {
    py::gil_scoped_release unlocked; // cataloguing the data can take a while
    loaded = load_node(args, false);
  }
  return summary(*loaded.cfg, loaded.outcome.setup);
}

py::array_t<float> copy_of(const tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array_t<float> out(shape);
  std::memcpy(out.mutable_data(), t.data(), t.size() * sizeof(float));
  return out;
}

/// A step taken from the worker: the values and the batch as NumPy copies
/// (valid after the step), the gradients copied in, then the answer. Used
/// once: after answer or refuse every call raises.
class taken_step {
public:
  taken_step(python_worker& worker, posted_step step) : worker_(worker), step_(step) {}

  py::list params() const {
    require_open();
    py::list out;
    for (auto& value : *step_.params)
      out.append(copy_of(value));
    return out;
  }
  py::array_t<float> features() const {
    require_open();
    return copy_of(step_.examples->images);
  }
  py::array_t<int64_t> labels() const {
    require_open();
    auto& labels = step_.examples->labels;
    py::array_t<int64_t> out(static_cast<py::ssize_t>(labels.size()));
    auto* data = out.mutable_data();
    for (size_t i = 0; i < labels.size(); ++i)
      data[i] = labels[i];
    return out;
  }
  /// One C-contiguous float32 array a variable, in the model's order, each
  /// of its variable's shape.
  void set_gradients(const std::vector<py::array_t<float, py::array::c_style>>& grads) {
    require_open();
    auto& specs = worker_.variables();
    if (grads.size() != specs.size())
      throw py::value_error("expected " + std::to_string(specs.size()) + " gradients, got "
                            + std::to_string(grads.size()));
    for (size_t i = 0; i < specs.size(); ++i) {
      auto& target = (*step_.grads)[i];
      std::vector<int64_t> shape(grads[i].shape(), grads[i].shape() + grads[i].ndim());
      if (shape != target.shape())
        throw py::value_error("the gradient of " + specs[i].name + " has shape "
                              + troupe::to_string(shape) + ", but the variable's is "
                              + troupe::to_string(target.shape()));
      std::memcpy(target.data(), grads[i].data(), target.size() * sizeof(float));
    }
  }
  void answer(double loss, size_t correct) {
    require_open();
    batch_stats stats;
    stats.loss = loss;
    stats.correct = correct;
    stats.examples = step_.examples->size();
    open_ = false;
    worker_.handoff().answer(stats);
  }
  void refuse(const std::string& why) {
    require_open();
    open_ = false;
    worker_.handoff().refuse(why);
  }

private:
  void require_open() const {
    if (!open_)
      throw std::runtime_error("this step was answered: take the next one");
  }

  python_worker& worker_;
  posted_step step_;
  bool open_ = true;
};

std::optional<taken_step> take(python_worker& worker, double timeout_s) {
  std::optional<posted_step> step;
  {
    py::gil_scoped_release unlocked;
    step = worker.handoff().take(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
  }
  if (!step)
    return std::nullopt;
  return taken_step(worker, *step);
}

std::optional<int> join(python_worker& worker, double timeout_s) {
  py::gil_scoped_release unlocked;
  return worker.join(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)));
}

py::list variables_of(const python_worker& worker) {
  py::list out;
  for (auto& spec : worker.variables())
    out.append(py::make_tuple(spec.name, py::tuple(py::cast(spec.shape))));
  return out;
}

} // namespace
} // namespace troupe::python

PYBIND11_MODULE(_native, m) {
  using namespace troupe::python;
  m.doc() = "Troupe's C++ runtime, for the troupe package (use troupe, not this module)";
  py::register_exception<config_error>(m, "ConfigError", PyExc_ValueError);
  m.def("load_config", &load_config, py::arg("args"),
        "A task's configuration loaded and validated as troupe-node does.");
  py::class_<taken_step>(m, "Step")
    .def("params", &taken_step::params)
    .def("features", &taken_step::features)
    .def("labels", &taken_step::labels)
    .def("set_gradients", &taken_step::set_gradients, py::arg("grads"))
    .def("answer", &taken_step::answer, py::arg("loss"), py::arg("correct"))
    .def("refuse", &taken_step::refuse, py::arg("why"));
  py::class_<python_worker>(m, "Worker")
    .def(py::init<const std::vector<std::string>&>(), py::arg("args"))
    .def_property_readonly("name", [](const python_worker& w) { return w.setup().name(); })
    .def_property_readonly("variables", &variables_of)
    .def("start", &python_worker::start)
    .def("take", &take, py::arg("timeout_s"), py::keep_alive<0, 1>())
    .def_property_readonly("closed", [](python_worker& w) { return w.handoff().closed(); })
    .def("stop", &python_worker::stop, py::arg("why"))
    .def("leave", &python_worker::leave)
    .def("errors", &python_worker::errors)
    .def("join", &join, py::arg("timeout_s"));
}
