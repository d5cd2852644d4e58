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

#include "python/native/arrays.hpp"
#include "python/native/python_worker.hpp"
#include "tensor/sparse/lookup_batch.hpp"

namespace py = pybind11;

namespace troupe::python {
namespace {

// reported_metrics::max_name (actors/protocol), which this module does not include.
constexpr size_t reported_metrics_name_limit = 64;

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

/// A table's distinct keys (first-seen order) and the position of each
/// given id among them, as int64 arrays (copies).
std::pair<py::array_t<int64_t>, py::array_t<int64_t>> keys_and_where(const batch_rows& batch) {
  auto& keys = batch.keys.keys();
  auto& inverse = batch.keys.inverse();
  py::array_t<int64_t> k(static_cast<py::ssize_t>(keys.size()));
  std::memcpy(k.mutable_data(), keys.data(), keys.size() * sizeof(int64_t));
  py::array_t<int64_t> where(static_cast<py::ssize_t>(inverse.size()));
  std::copy(inverse.begin(), inverse.end(), where.mutable_data());
  return {k, where};
}

/// A step taken from the worker: the values and the batch as NumPy copies
/// (valid after the step), the gradients copied in, then the answer. Used
/// once: after answer or refuse every call raises.
class taken_step {
public:
  taken_step(python_worker& worker, posted_step step) : worker_(worker), step_(step) {}

  py::list params() const {
    require_open(posted_step::kind::compute);
    py::list out;
    for (auto& value : *step_.params)
      out.append(copy_of(value));
    return out;
  }
  /// compute, without a copy: the pulled values, the gradient buffers
  /// (zeroed: a backward pass may accumulate into them), and each table's
  /// (keys, where, values, gradient buffer), as arrays over the worker's
  /// own buffers. Valid until the step is answered or refused: use them
  /// before, never after.
  py::tuple views() const {
    require_open(posted_step::kind::compute);
    py::list values, grads, rows;
    for (auto& value : *step_.params)
      values.append(view_of(const_cast<float*>(value.data()), value.shape()));
    for (auto& grad : *step_.grads) {
      std::fill(grad.data(), grad.data() + grad.size(), 0.0f);
      grads.append(view_of(grad.data(), grad.shape()));
    }
    for (size_t t = 0; step_.rows && t < step_.rows->size(); ++t) {
      auto& batch = table_rows(t);
      shape_t shape{static_cast<int64_t>(batch.keys.size()),
                    static_cast<int64_t>(worker_.tables()[t].dim)};
      std::fill(batch.grads.begin(), batch.grads.end(), 0.0f);
      auto [keys, where] = keys_and_where(batch);
      rows.append(py::make_tuple(keys, where, view_of(batch.values.data(), shape),
                                 view_of(batch.grads.data(), shape)));
    }
    return py::make_tuple(values, grads, rows);
  }
  /// "keys": the program gives its next batch's keys; "compute": a step.
  std::string kind() const { return step_.what == posted_step::kind::keys ? "keys" : "compute"; }
  /// keys: each table's ids of the batch, occurrence by occurrence, in the
  /// declared tables' order. Checked here: a negative id, or more distinct
  /// ids than a request may carry, raises ValueError and gives nothing.
  void set_keys(const std::vector<py::array_t<int64_t, py::array::c_style>>& ids) {
    require_open(posted_step::kind::keys);
    auto& tables = worker_.tables();
    if (ids.size() != tables.size() || !step_.rows || step_.rows->size() != tables.size())
      throw py::value_error("expected the ids of " + std::to_string(tables.size()) + " tables, got "
                            + std::to_string(ids.size()));
    auto limit = static_cast<size_t>(worker_.setup().train.embedding.max_keys_per_request);
    // Straight into the step's rows: their distinct keys are what it pulls.
    for (size_t t = 0; t < ids.size(); ++t) {
      auto* data = ids[t].data();
      auto n = static_cast<size_t>(ids[t].size());
      for (size_t i = 0; i < n; ++i)
        if (data[i] < 0)
          throw py::value_error("table " + tables[t].name + ": id " + std::to_string(data[i])
                                + " is negative; ids are int64 keys >= 0");
      auto& keys = table_rows(t).keys;
      keys.assign(data, n);
      if (keys.size() > limit)
        throw py::value_error("table " + tables[t].name + ": the batch looks up "
                              + std::to_string(keys.size())
                              + " distinct ids, more than embedding.max-keys-per-request = "
                              + std::to_string(limit) + "; use smaller batches or raise it");
    }
    open_ = false;
    worker_.handoff().answer({});
  }
  /// compute: table t's distinct keys (first-seen order), the position of
  /// each given id among them, and their pulled values [keys, dim]: copies.
  py::tuple rows(size_t t) const {
    require_open(posted_step::kind::compute);
    auto& batch = table_rows(t);
    auto dim = static_cast<py::ssize_t>(worker_.tables()[t].dim);
    py::array_t<float> values({static_cast<py::ssize_t>(batch.keys.size()), dim});
    std::memcpy(values.mutable_data(), batch.values.data(), batch.values.size() * sizeof(float));
    auto [keys, where] = keys_and_where(batch);
    return py::make_tuple(keys, where, values);
  }
  /// compute: the gradient of table t's rows [keys, dim], each row's summed
  /// over its occurrences.
  void set_row_gradients(size_t t, const py::array_t<float, py::array::c_style>& grads) {
    require_open(posted_step::kind::compute);
    auto& batch = table_rows(t);
    auto dim = static_cast<py::ssize_t>(worker_.tables()[t].dim);
    auto n = static_cast<py::ssize_t>(batch.keys.size());
    if (grads.ndim() != 2 || grads.shape(0) != n || grads.shape(1) != dim)
      throw py::value_error("the rows' gradient of table " + worker_.tables()[t].name + " must be ["
                            + std::to_string(n) + ", " + std::to_string(dim) + "]");
    std::memcpy(batch.grads.data(), grads.data(), batch.grads.size() * sizeof(float));
  }
  /// A table model's batch from the worker's data: its dense values
  /// [examples, dense], its keys [examples, fields, slots] (-1: empty) and
  /// their weights, as troupe.load_data gives them.
  py::tuple categorical() const {
    require_open(posted_step::kind::compute);
    auto& layout = worker_.keys();
    auto& images = step_.examples->images;
    auto n = static_cast<py::ssize_t>(step_.examples->size());
    auto width = static_cast<size_t>(layout.width());
    if (!layout.sparse() || images.size() != static_cast<size_t>(n) * width)
      throw std::runtime_error("this model's batches hold no keys");
    auto dense = static_cast<py::ssize_t>(layout.dense);
    auto slots = static_cast<size_t>(layout.slots());
    py::array_t<float> values({n, dense});
    py::array_t<int64_t> ids({n, static_cast<py::ssize_t>(layout.fields),
                              static_cast<py::ssize_t>(layout.keys_per_field)});
    py::array_t<float> weights({n, static_cast<py::ssize_t>(layout.fields),
                                static_cast<py::ssize_t>(layout.keys_per_field)});
    auto* values_out = values.mutable_data();
    auto* ids_out = ids.mutable_data();
    auto* weights_out = weights.mutable_data();
    for (py::ssize_t e = 0; e < n; ++e) {
      const float* example = images.data() + static_cast<size_t>(e) * width;
      std::memcpy(values_out + e * dense, example, static_cast<size_t>(dense) * sizeof(float));
      for (size_t s = 0; s < slots; ++s) {
        const float* slot = example + dense + s * key_layout::floats_per_key;
        ids_out[static_cast<size_t>(e) * slots + s] = unpack_key(slot);
        weights_out[static_cast<size_t>(e) * slots + s] = slot[0] < 0 ? 0.0f : slot[3];
      }
    }
    return py::make_tuple(values, ids, weights);
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
    require_open(posted_step::kind::compute);
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
  /// `examples`: the batch's size where the program brought it (0: the
  /// worker's batch's).
  void answer(double loss, size_t correct, size_t examples) {
    require_open(posted_step::kind::compute);
    batch_stats stats;
    stats.loss = loss;
    stats.correct = correct;
    stats.examples = examples > 0 ? examples : step_.examples->size();
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
  void require_open(posted_step::kind what) const {
    require_open();
    if (step_.what != what)
      throw std::runtime_error(std::string("this step asks for ")
                               + (step_.what == posted_step::kind::keys ? "keys" : "a compute"));
  }
  batch_rows& table_rows(size_t t) const {
    if (!step_.rows || t >= step_.rows->size())
      throw py::index_error("no table " + std::to_string(t) + " in this step");
    return *(*step_.rows)[t];
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

using declared_variables =
  std::vector<std::pair<std::string, py::array_t<float, py::array::c_style>>>;
using declared_tables = std::vector<std::pair<std::string, uint32_t>>;

std::unique_ptr<python_worker> make_worker(const std::vector<std::string>& args,
                                           std::optional<declared_variables> variables,
                                           const declared_tables& tables) {
  std::optional<model_declaration> declaration;
  if (variables) {
    declaration.emplace();
    for (auto& [name, value] : *variables) {
      shape_t shape(value.shape(), value.shape() + value.ndim());
      if (shape.empty())
        shape = {1};
      tensor first(shape);
      std::memcpy(first.data(), value.data(), first.size() * sizeof(float));
      declaration->variables.push_back({name, shape, {}});
      declaration->initial.push_back(std::move(first));
    }
    for (auto& [name, dim] : tables)
      declaration->tables.push_back({name, dim});
  }
  py::gil_scoped_release unlocked; // cataloguing the data can take a while
  return std::make_unique<python_worker>(args, std::move(declaration));
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
  bind_files(m);
  m.def("load_config", &load_config, py::arg("args"),
        "A task's configuration loaded and validated as troupe-node does.");
  py::class_<taken_step>(m, "Step")
    .def("params", &taken_step::params)
    .def("features", &taken_step::features)
    .def("labels", &taken_step::labels)
    .def("categorical", &taken_step::categorical)
    .def_property_readonly("kind", &taken_step::kind)
    .def("set_keys", &taken_step::set_keys, py::arg("ids"))
    .def("rows", &taken_step::rows, py::arg("table"))
    .def("views", &taken_step::views)
    .def("set_row_gradients", &taken_step::set_row_gradients, py::arg("table"), py::arg("grads"))
    .def("set_gradients", &taken_step::set_gradients, py::arg("grads"))
    .def("answer", &taken_step::answer, py::arg("loss"), py::arg("correct"),
         py::arg("examples") = 0)
    .def("refuse", &taken_step::refuse, py::arg("why"));
  py::class_<python_worker>(m, "Worker")
    .def(py::init(&make_worker), py::arg("args"), py::arg("variables") = std::nullopt,
         py::arg("tables") = declared_tables{})
    .def_property_readonly("name", [](const python_worker& w) { return w.setup().name(); })
    .def_property_readonly("variables", &variables_of)
    .def("start", &python_worker::start)
    .def("take", &take, py::arg("timeout_s"), py::keep_alive<0, 1>())
    .def_property_readonly("closed", [](python_worker& w) { return w.handoff().closed(); })
    .def("stop", &python_worker::stop, py::arg("why"))
    .def("leave", &python_worker::leave)
    .def("errors", &python_worker::errors)
    .def_property_readonly("tables",
                           [](const python_worker& w) {
                             py::list out;
                             for (auto& t : w.tables())
                               out.append(py::make_tuple(t.name, t.dim));
                             return out;
                           })
    .def(
      "report",
      [](python_worker& w, const std::string& name, double value) {
        if (name.empty() || name.size() > reported_metrics_name_limit)
          throw py::value_error("a metric's name has 1.."
                                + std::to_string(reported_metrics_name_limit) + " characters");
        w.handoff().report(name, value);
      },
      py::arg("name"), py::arg("value"))
    .def("join", &join, py::arg("timeout_s"));
}
