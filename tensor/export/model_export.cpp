#include "tensor/export/model_export.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json_fields.hpp"
#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/export/onnx.hpp"
#include "tensor/export/table_export.hpp"

namespace troupe {

namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string padding_text(padding p) {
  return p == padding::same ? "same" : "valid";
}

} // namespace

std::vector<std::string> layer_specs(const model& net) {
  std::vector<std::string> out;
  for (auto& l : net.layers()) {
    auto name = " name=" + l.name;
    switch (l.type) {
      case layer_desc::kind::dense:
        out.push_back("dense" + name + " units=" + std::to_string(l.units));
        break;
      case layer_desc::kind::conv2d:
        if (l.kernel_h != l.kernel_w)
          throw troupe_error(l.name + ": a non-square kernel has no layer spec");
        out.push_back("conv2d" + name + " filters=" + std::to_string(l.filters)
                      + " kernel=" + std::to_string(l.kernel_h)
                      + " stride=" + std::to_string(l.stride) + " padding=" + padding_text(l.pad));
        break;
      case layer_desc::kind::max_pool:
        out.push_back("max_pool" + name + " size=" + std::to_string(l.kernel_h)
                      + " stride=" + std::to_string(l.stride) + " padding=" + padding_text(l.pad));
        break;
      case layer_desc::kind::relu:
        out.push_back("relu" + name);
        break;
      case layer_desc::kind::dropout:
        out.push_back("dropout" + name + " rate=" + number_text(l.rate));
        break;
      case layer_desc::kind::flatten:
        out.push_back("flatten" + name);
        break;
      case layer_desc::kind::embedding:
        out.push_back("embedding" + name + " dim=" + std::to_string(l.units)
                      + " combiner=" + name_of(l.combine));
        break;
    }
  }
  return out;
}

std::string write_model_export(const std::string& dir, const model_card& card,
                               const std::vector<variable_spec>& variables,
                               const std::vector<tensor>& values, const table_rows* table) {
  if (card.has_table() != (table != nullptr))
    throw checkpoint_error(dir + ": model " + card.model
                           + (table ? " has no embedding table" : " needs its embedding table"));
  if (values.size() != variables.size())
    throw checkpoint_error(dir + ": " + std::to_string(values.size()) + " values for "
                           + std::to_string(variables.size()) + " variables");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw checkpoint_error(dir + ": cannot create the directory (" + ec.message() + ")");
  std::vector<safetensors_writer::entry> entries;
  for (size_t i = 0; i < variables.size(); ++i) {
    if (values[i].shape() != variables[i].shape)
      throw checkpoint_error(dir + ": " + variables[i].name + " has shape "
                             + to_string(values[i].shape()) + ", expected "
                             + to_string(variables[i].shape));
    entries.push_back({variables[i].name, variables[i].shape});
  }
  if (table) {
    auto n = static_cast<int64_t>(table->rows());
    entries.push_back({table_keys_name, {n}, element_type::i64});
    entries.push_back({table_values_name, {n, int64_t{card.table_dim()}}});
  }
  auto weights = dir + "/model.safetensors";
  {
    safetensors_writer writer(weights + ".tmp", entries,
                              {{"format", "troupe-model"}, {"step", std::to_string(card.step)}});
    for (auto& v : values)
      writer.append(v);
    if (table)
      table->append_to(writer);
    writer.finish();
  }
  std::filesystem::rename(weights + ".tmp", weights, ec);
  if (ec)
    throw checkpoint_error(weights + ": cannot move into place (" + ec.message() + ")");
  std::string written = "model.safetensors, model.onnx, model.json";
  if (!table) {
    write_file_atomically(
      dir + "/model.onnx",
      onnx_model(*make_model(model_kind::custom, card.options()), card, values));
  } else {
    std::filesystem::remove(dir + "/model.onnx", ec); // an older export's
    try {
      write_file_atomically(dir + "/model.onnx", onnx_table_model(card, values, table->table()));
    } catch (const troupe_error& e) {
      written = std::string("model.safetensors, model.json; ") + e.what();
    }
  }
  write_file_atomically(dir + "/model.json", json::write(card.to_json()) + "\n");
  return written;
}

std::unique_ptr<model> network_of(const model_card& card, const std::string& where) {
  auto kind = enum_from_name<model_kind>(card.model);
  bool embedding = kind && uses_embeddings(*kind, card.layers);
  if (embedding != card.has_table())
    fail_checkpoint(where,
                    "model " + card.model
                      + (embedding ? " needs the card's \"embedding\" object (a card of an older "
                                     "Troupe?)"
                                   : " has no embedding table, but the card describes one"));
  try {
    return make_model(embedding ? *kind : model_kind::custom, card.options());
  } catch (const std::exception& e) {
    fail_checkpoint(where, std::string("its layers do not build a network: ") + e.what());
  }
}

namespace {

// The card at `card_path` and the network it describes.
exported_model read_card(const std::string& card_path) {
  json::value v;
  try {
    v = json::parse(read_file_bounded(card_path, 64u << 20));
  } catch (const json::parse_error& e) {
    fail_checkpoint(card_path, std::string("not valid JSON: ") + e.what());
  }
  exported_model out;
  out.card = model_card::from_json(v, card_path);
  out.net = network_of(out.card, card_path);
  return out;
}

std::vector<tensor> variables_of(const checkpoint_reader& reader,
                                 const std::vector<variable_spec>& variables) {
  std::vector<tensor> out;
  for (auto& v : variables) {
    auto* shape = reader.manifest().shape_of(v.name);
    if (shape == nullptr)
      fail_checkpoint(reader.dir(), "holds no " + v.name + " (a checkpoint of another model?)");
    if (*shape != v.shape)
      fail_checkpoint(reader.dir(), v.name + " has shape " + to_string(*shape)
                                      + " there, but the model's is " + to_string(v.shape));
    out.push_back(reader.assemble(v.name));
  }
  return out;
}

} // namespace

exported_model read_model_export(const std::string& dir) {
  auto out = read_card(dir + "/model.json");
  safetensors_file weights(dir + "/model.safetensors");
  for (auto& var : out.net->variables()) {
    auto it = weights.entries().find(var.name);
    if (it == weights.entries().end())
      fail_checkpoint(dir + "/model.safetensors",
                      "lacks " + var.name + ", which the network needs");
    if (it->second.shape != var.shape)
      fail_checkpoint(dir + "/model.safetensors",
                      var.name + " has shape " + to_string(it->second.shape)
                        + ", but the network needs " + to_string(var.shape));
    out.params.push_back(weights.read(var.name));
  }
  if (out.card.has_table())
    out.table = table_from_export(weights, out.card);
  return out;
}

namespace {

// load_model's work, with a checkpoint's table left in its files: their
// reader comes back in `checkpoint` (null for an export directory, whose
// table is loaded).
exported_model load_model_parts(const std::string& path, const std::string& card,
                                std::unique_ptr<checkpoint_reader>& checkpoint) {
  namespace fs = std::filesystem;
  if (card.empty() && fs::exists(path + "/model.json"))
    return read_model_export(path);
  if (!fs::exists(path + "/manifest.json"))
    fail_checkpoint(path,
                    "neither an exported model (model.json) nor a checkpoint (manifest.json)");
  auto card_path = card.empty() ? (fs::path(path).parent_path() / "model.json").string() : card;
  if (!fs::exists(card_path))
    fail_checkpoint(path,
                    "a checkpoint, but " + card_path
                      + " (the run's model card, written at its start) is missing; pass the card "
                        "with --card");
  auto out = read_card(card_path);
  checkpoint = std::make_unique<checkpoint_reader>(path); // checks every file once
  out.params = variables_of(*checkpoint, out.net->variables());
  out.card.step = checkpoint->manifest().step;
  return out;
}

} // namespace

exported_model load_model(const std::string& path, const std::string& card) {
  std::unique_ptr<checkpoint_reader> checkpoint;
  auto out = load_model_parts(path, card, checkpoint);
  if (checkpoint && out.card.has_table())
    out.table = table_from_checkpoint(*checkpoint, out.card);
  return out;
}

model_to_export load_model_to_export(const std::string& path, const std::string& card) {
  model_to_export out;
  out.model = load_model_parts(path, card, out.checkpoint);
  if (out.model.table)
    out.rows = rows_of_table(out.model.table);
  else if (out.model.card.has_table())
    out.rows = rows_of_checkpoint(*out.checkpoint, out.model.card);
  return out;
}

std::shared_ptr<data_split> split_for_model(const model_card& card, data_format format,
                                            const std::vector<std::string>& files,
                                            const std::vector<std::string>& label_files,
                                            const csv_layout& csv, bool labelled) {
  auto split = std::make_shared<data_split>();
  split->name = "input";
  split->format = format;
  split->csv = csv;
  // Empty cells become what they became in training; a card from before
  // data.missing-values refuses them, as that training did.
  split->csv.fills = card.missing;
  if (!card.missing.known())
    split->csv.missing = missing_values::refuse;
  split->item_shape = card.input;
  split->classes = card.classes;
  split->label_names = card.label_names;
  split->norm = card.norm;
  split->task = card.task;
  split->keys = card.keys;
  split->labelled = labelled;
  // The file's own values first (no indicators yet): another data set's
  // columns are named by their count before anything else.
  auto plain = split->csv;
  plain.fills = {};
  auto indicators = card.missing.indicators();
  auto values = num_elements(card.input) - indicators;
  for (size_t i = 0; i < files.size(); ++i) {
    auto labels = i < label_files.size() ? label_files[i] : std::string{};
    auto reader = open_records(format, files[i], labels, plain);
    if (reader->features() != values)
      throw data_error(
        files[i] + ": examples of " + std::to_string(reader->features()) + " values (shape "
        + to_string(reader->item_shape()) + "), but the model takes " + std::to_string(values)
        + (indicators ? " and " + std::to_string(indicators) + " indicator(s)" : std::string())
        + " (shape " + to_string(card.input) + ")");
    open_records(format, files[i], labels, split->csv); // its columns against training's
    split->files.push_back({files[i], labels, 0, 0});
  }
  return split;
}

} // namespace troupe
