// troupe._native's functions over files: a run's checkpoint read back into
// NumPy (troupe.torch.load), and a configuration's data read by Troupe's
// own readers (troupe.load_data), so that a PyTorch program sees its
// examples, keys included, exactly as a troupe-node worker does.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "python/native/arrays.hpp"
#include "python/native/python_worker.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/restore.hpp"
#include "tensor/data/catalog.hpp"
#include "tensor/data/key_layout.hpp"

namespace py = pybind11;

namespace troupe::python {

namespace {

/// The newest complete checkpoint in `path` (a log directory), or `path`
/// itself (a checkpoint directory): its step, every variable assembled, and
/// each table's keys and values gathered from every shard's file.
py::dict read_checkpoint(const std::string& path) {
  std::shared_ptr<const checkpoint_reader> reader;
  if (std::filesystem::exists(path + "/manifest.json")) {
    reader = std::make_shared<checkpoint_reader>(path);
  } else {
    auto choice = choose_checkpoint(path, *restore_request::parse("auto"));
    if (!choice.reader)
      throw py::value_error("no complete checkpoint in " + path
                            + " (a log directory, i.e. the run's checkpoint.log-dir, or one "
                              "ckpt-N directory)");
    reader = choice.reader;
  }
  py::dict variables;
  for (auto& [name, shape] : reader->manifest().variables)
    variables[py::str(name)] = copy_of(reader->assemble(name));
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> rows;
  std::map<std::string, size_t> dims;
  for (auto& [file, content] : reader->files())
    for (auto& [entry, e] : content.entries()) {
      if (entry.rfind("emb/", 0) != 0 || entry.size() < 10
          || entry.compare(entry.size() - 5, 5, "/keys") != 0)
        continue;
      auto table = entry.substr(4, entry.size() - 9);
      auto keys = content.read_i64(entry);
      auto values = content.read("emb/" + table + "/values");
      auto& into = rows[table];
      into.first.insert(into.first.end(), keys.begin(), keys.end());
      into.second.insert(into.second.end(), values.data(), values.data() + values.size());
      if (values.shape().size() == 2)
        dims[table] = static_cast<size_t>(values.shape()[1]);
    }
  py::dict tables;
  for (auto& [table, kv] : rows) {
    auto n = static_cast<py::ssize_t>(kv.first.size());
    py::array_t<int64_t> keys(n);
    std::memcpy(keys.mutable_data(), kv.first.data(), kv.first.size() * sizeof(int64_t));
    py::array_t<float> values({n, static_cast<py::ssize_t>(dims[table])});
    std::memcpy(values.mutable_data(), kv.second.data(), kv.second.size() * sizeof(float));
    tables[py::str(table)] = py::make_tuple(keys, values);
  }
  py::dict out;
  out["step"] = reader->manifest().step;
  out["dir"] = reader->dir();
  out["variables"] = variables;
  out["tables"] = tables;
  return out;
}

// One set as arrays: dense values [n, dense], keys and their weights
// [n, fields, keys per field] (key -1: an empty slot), labels (int64
// classes) or targets (float32, regression).
py::dict arrays_of(std::shared_ptr<const data_split> split) {
  auto data = load_all(split);
  auto n = static_cast<py::ssize_t>(data.size());
  auto& keys = split->keys;
  auto width = static_cast<size_t>(split->features());
  auto dense = static_cast<py::ssize_t>(split->dense_features());
  py::array_t<float> values({n, dense});
  auto fields = static_cast<py::ssize_t>(keys.fields);
  auto per_field = static_cast<py::ssize_t>(keys.keys_per_field);
  py::array_t<int64_t> ids({n, fields, per_field});
  py::array_t<float> weights({n, fields, per_field});
  py::array_t<int64_t> labels(n);
  py::array_t<float> targets(n);
  auto* images = data.images.data();
  // Raw pointers: a set without dense values (or keys) has extents of 0,
  // which pybind11's checked accessors refuse.
  auto* dense_out = values.mutable_data();
  auto* ids_out = ids.mutable_data();
  auto* weights_out = weights.mutable_data();
  auto slots = static_cast<size_t>(fields * per_field);
  for (py::ssize_t e = 0; e < n; ++e) {
    const float* example = images + static_cast<size_t>(e) * width;
    std::memcpy(dense_out + static_cast<size_t>(e * dense), example,
                static_cast<size_t>(dense) * sizeof(float));
    for (size_t s = 0; s < slots; ++s) {
      const float* slot = example + dense + s * key_layout::floats_per_key;
      ids_out[static_cast<size_t>(e) * slots + s] = unpack_key(slot);
      weights_out[static_cast<size_t>(e) * slots + s] = slot[0] < 0 ? 0.0f : slot[3];
    }
    labels.mutable_data()[e] = e < static_cast<py::ssize_t>(data.labels.size()) ? data.labels[e]
                                                                                : 0;
    targets.mutable_data()[e] = e < static_cast<py::ssize_t>(data.targets.size()) ? data.targets[e]
                                                                                  : 0;
  }
  py::dict out;
  out["dense"] = values;
  out["keys"] = ids;
  out["weights"] = weights;
  out["labels"] = labels;
  out["targets"] = targets;
  out["classes"] = split->classes;
  out["regression"] = split->task == objective::regression;
  return out;
}

py::dict load_data(const std::vector<std::string>& args) {
  auto loaded = load_node(args, false);
  auto& t = loaded.outcome.setup.train;
  data_catalog catalog;
  {
    py::gil_scoped_release unlocked;
    try {
      catalog = catalog_data(t.data, t.data_dir);
    } catch (const std::exception& e) {
      throw py::value_error(std::string("data: ") + e.what());
    }
  }
  py::dict out;
  out["train"] = arrays_of(catalog.train);
  out["test"] = arrays_of(catalog.evaluation());
  return out;
}

} // namespace

void bind_files(py::module_& m) {
  m.def("read_checkpoint", &read_checkpoint, py::arg("path"),
        "A checkpoint's variables and tables (the newest complete one of a log directory).");
  m.def("load_data", &load_data, py::arg("args"),
        "A configuration's [data], training and evaluation sets, read by Troupe's readers.");
}

} // namespace troupe::python
