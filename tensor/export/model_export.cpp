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

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw checkpoint_error(path + ": " + what);
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

using json::fields;
using json::shape_json;

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

model_card describe_model(model_kind kind, const model& net, const data_split* train,
                          int64_t step) {
  model_card card;
  card.model = name_of(kind);
  card.layers = layer_specs(net);
  card.input = net.input_shape();
  auto layers = net.layers();
  // A model with an embedding table has no layer list: one output, a logit
  // of two classes or the regression target.
  card.classes = layers.empty() ? 2 : num_elements(layers.back().output);
  card.step = step;
  if (!net.tables().empty())
    card.embedding_dim = static_cast<int64_t>(net.tables()[0].dim) - (layers.empty() ? 1 : 0);
  if (train) {
    card.task = train->task;
    card.keys = train->keys;
    if (layers.empty())
      card.classes = train->classes;
    card.label_names = train->label_names;
    card.norm = train->norm;
    if (train->format == data_format::csv && !train->memory)
      card.label_column = train->csv.label_column;
  }
  return card;
}

model_options model_card::options() const {
  model_options o;
  o.layers = layers;
  o.input = input;
  o.classes = classes;
  o.task = task;
  o.keys = keys;
  o.embedding_dim = embedding_dim;
  o.deep_layers = deep_layers;
  o.vocabulary = vocabulary;
  o.ids = ids;
  return o;
}

json::value model_card::to_json() const {
  json::array names;
  for (auto& n : label_names)
    names.emplace_back(n);
  json::array layer_list;
  for (auto& l : layers)
    layer_list.emplace_back(l);
  json::object normalize{
    {"kind", name_of(norm.kind == normalization::automatic ? normalization::none : norm.kind)}};
  if (norm.kind == normalization::scale)
    normalize["scale"] = static_cast<double>(norm.scale);
  if (norm.kind == normalization::standardize) {
    json::array mean, stddev;
    for (size_t i = 0; i < norm.mean.size(); ++i) {
      mean.emplace_back(static_cast<double>(norm.mean[i]));
      stddev.emplace_back(1.0 / static_cast<double>(norm.inv_stddev[i]));
    }
    normalize["mean"] = std::move(mean);
    normalize["stddev"] = std::move(stddev);
  }
  json::object out{{"format", "troupe-model"},
                   {"version", format_version},
                   {"model", model},
                   {"layers", std::move(layer_list)},
                   {"input", shape_json(input)},
                   {"classes", classes},
                   {"task", name_of(task)},
                   {"label_names", std::move(names)},
                   {"label_column", label_column},
                   {"normalize", std::move(normalize)},
                   {"step", step}};
  if (has_table()) {
    json::array deep, categorical, ignored, sizes;
    for (auto w : deep_layers)
      deep.emplace_back(w);
    for (auto n : vocabulary)
      sizes.emplace_back(n);
    for (auto& c : categorical_columns)
      categorical.emplace_back(c);
    for (auto& c : ignore_columns)
      ignored.emplace_back(c);
    json::object table{{"dense", keys.dense},
                       {"fields", keys.fields},
                       {"keys_per_field", keys.keys_per_field},
                       {"dim", embedding_dim},
                       {"deep_layers", std::move(deep)},
                       {"initializer", name_of(table_init.kind)},
                       {"init_scale", table_init.scale},
                       {"seed", std::to_string(table_init.seed)}, // 64 bits: text
                       {"categorical_columns", std::move(categorical)},
                       {"ignore_columns", std::move(ignored)}};
    if (!vocabulary.empty()) {
      table.emplace("vocabulary", std::move(sizes));
      table.emplace("id_mapping", name_of(ids));
    }
    out["embedding"] = std::move(table);
  }
  return out;
}

model_card model_card::from_json(const json::value& v, const std::string& path) {
  fields top{path, v, ""};
  if (v.as_object() == nullptr || top.text("format") != "troupe-model")
    fail(path, "not a Troupe model card (model.json)");
  if (top.integer("version", 0, 1 << 30) != format_version)
    fail(path, "model card version " + std::to_string(top.integer("version", 0, 1 << 30))
                 + " is not " + std::to_string(format_version) + " (another Troupe release?)");
  model_card card;
  card.model = top.text("model");
  card.layers = top.strings("layers");
  for (auto& d : top.list("input")) {
    auto i = d.as_int();
    if (!i || *i < 1 || *i > 65536)
      fail(path, "\"input\" must hold dimensions in 1..65536");
    card.input.push_back(*i);
  }
  if (card.input.empty() || card.input.size() > 3)
    fail(path, "\"input\" must have rank 1 to 3");
  card.classes = top.integer("classes", 1, data_limits::max_classes);
  auto task = enum_from_name<objective>(top.text("task"));
  if (!task)
    fail(path, "\"task\" must be classification or regression");
  card.task = *task;
  card.label_names = top.strings("label_names");
  if (!card.label_names.empty() && static_cast<int64_t>(card.label_names.size()) != card.classes)
    fail(path, "\"label_names\" names " + std::to_string(card.label_names.size())
                 + " classes, but \"classes\" is " + std::to_string(card.classes));
  card.step = top.integer("step", 0, int64_t{1} << 53);
  if (auto* table = v.as_object(); table && table->count("embedding")) {
    fields e{path, top.get("embedding"), "embedding."};
    card.keys.dense = e.integer("dense", 0, 1 << 20);
    card.keys.fields = e.integer("fields", 1, max_shared_fields);
    card.keys.keys_per_field = e.integer("keys_per_field", 1, data_limits::max_keys);
    card.embedding_dim = e.integer("dim", 0, 1024);
    for (auto& w : e.list("deep_layers")) {
      auto i = w.as_int();
      if (!i || *i < 1 || *i > 65536)
        fail(path, "\"embedding\".\"deep_layers\" must hold widths in 1..65536");
      card.deep_layers.push_back(*i);
    }
    auto init = enum_from_name<row_initializer>(e.text("initializer"));
    if (!init)
      fail(path,
           "\"embedding\".\"initializer\" must be zeros, uniform, normal or truncated_normal");
    card.table_init.kind = *init;
    auto* scale = e.get("init_scale").as_number();
    if (!scale || !(*scale >= 0) || !std::isfinite(*scale))
      fail(path, "\"embedding\".\"init_scale\" must be a number >= 0");
    card.table_init.scale = *scale;
    auto seed = e.text("seed");
    if (seed.empty() || seed.size() > 20
        || seed.find_first_not_of("0123456789") != std::string::npos)
      fail(path, "\"embedding\".\"seed\" must be a decimal integer (as text)");
    try {
      card.table_init.seed = std::stoull(seed);
    } catch (const std::exception&) {
      fail(path, "\"embedding\".\"seed\" is above 2^64");
    }
    card.categorical_columns = e.strings("categorical_columns");
    card.ignore_columns = e.strings("ignore_columns");
    if (e.v.find("vocabulary")) {
      for (auto& n : e.list("vocabulary")) {
        auto i = n.as_int();
        if (!i || *i < 1 || *i > max_plain_id + 1)
          fail(path, "\"embedding\".\"vocabulary\" must hold field sizes in 1..2^48");
        card.vocabulary.push_back(*i);
      }
      auto mapping = enum_from_name<id_mapping>(e.text("id_mapping"));
      if (!mapping)
        fail(path, "\"embedding\".\"id_mapping\" must be identity or hash");
      card.ids = *mapping;
      if (static_cast<int64_t>(card.vocabulary.size()) != card.keys.fields)
        fail(path, "\"embedding\".\"vocabulary\" lists " + std::to_string(card.vocabulary.size())
                     + " field sizes for " + std::to_string(card.keys.fields) + " fields");
    }
    if (num_elements(card.input) != card.keys.width())
      fail(path, "\"input\" holds " + std::to_string(num_elements(card.input))
                   + " values, but the embedding layout " + std::to_string(card.keys.width()));
  }
  card.label_column = top.text("label_column");
  fields norm{path, top.get("normalize"), ""};
  auto kind = enum_from_name<normalization>(norm.text("kind"));
  if (!kind || *kind == normalization::automatic)
    fail(path, "\"normalize\".\"kind\" must be none, scale or standardize");
  card.norm.kind = *kind;
  if (*kind == normalization::scale) {
    auto* scale = norm.get("scale").as_number();
    if (!scale || !(*scale > 0) || !std::isfinite(*scale))
      fail(path, "\"normalize\".\"scale\" must be a positive number");
    card.norm.scale = static_cast<float>(*scale);
  }
  if (*kind == normalization::standardize) {
    card.norm.mean = norm.numbers("mean");
    auto stddev = norm.numbers("stddev");
    // Categorical data standardizes its dense values only.
    auto features = static_cast<size_t>(card.has_table() ? card.keys.dense
                                                         : num_elements(card.input));
    if (card.norm.mean.size() != features || stddev.size() != features)
      fail(path, "\"normalize\" needs one mean and one stddev per feature ("
                   + std::to_string(features) + ")");
    for (float sd : stddev) {
      if (!(sd > 0))
        fail(path, "\"normalize\".\"stddev\" must be positive");
      card.norm.inv_stddev.push_back(1.0f / sd);
    }
  }
  return card;
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

namespace {

// The card at `card_path` and the network it describes.
exported_model read_card(const std::string& card_path) {
  json::value v;
  try {
    v = json::parse(read_file_bounded(card_path, 64u << 20));
  } catch (const json::parse_error& e) {
    fail(card_path, std::string("not valid JSON: ") + e.what());
  }
  exported_model out;
  out.card = model_card::from_json(v, card_path);
  auto kind = enum_from_name<model_kind>(out.card.model);
  bool embedding = kind && uses_embeddings(*kind, out.card.layers);
  if (embedding != out.card.has_table())
    fail(card_path, "model " + out.card.model
                      + (embedding ? " needs the card's \"embedding\" object (a card of an older "
                                     "Troupe?)"
                                   : " has no embedding table, but the card describes one"));
  try {
    out.net = make_model(embedding ? *kind : model_kind::custom, out.card.options());
  } catch (const std::exception& e) {
    fail(card_path, std::string("its layers do not build a network: ") + e.what());
  }
  return out;
}

std::vector<tensor> variables_of(const checkpoint_reader& reader,
                                 const std::vector<variable_spec>& variables) {
  std::vector<tensor> out;
  for (auto& v : variables) {
    auto* shape = reader.manifest().shape_of(v.name);
    if (shape == nullptr)
      fail(reader.dir(), "holds no " + v.name + " (a checkpoint of another model?)");
    if (*shape != v.shape)
      fail(reader.dir(), v.name + " has shape " + to_string(*shape) + " there, but the model's is "
                           + to_string(v.shape));
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
      fail(dir + "/model.safetensors", "lacks " + var.name + ", which the network needs");
    if (it->second.shape != var.shape)
      fail(dir + "/model.safetensors", var.name + " has shape " + to_string(it->second.shape)
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
    fail(path, "neither an exported model (model.json) nor a checkpoint (manifest.json)");
  auto card_path = card.empty() ? (fs::path(path).parent_path() / "model.json").string() : card;
  if (!fs::exists(card_path))
    fail(path, "a checkpoint, but " + card_path
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
  split->item_shape = card.input;
  split->classes = card.classes;
  split->label_names = card.label_names;
  split->norm = card.norm;
  split->task = card.task;
  split->keys = card.keys;
  split->labelled = labelled;
  for (size_t i = 0; i < files.size(); ++i) {
    auto labels = i < label_files.size() ? label_files[i] : std::string{};
    auto reader = open_records(format, files[i], labels, csv);
    if (reader->features() != num_elements(card.input))
      throw data_error(files[i] + ": examples of " + std::to_string(reader->features())
                       + " values (shape " + to_string(reader->item_shape())
                       + "), but the model takes " + std::to_string(num_elements(card.input))
                       + " (shape " + to_string(card.input) + ")");
    split->files.push_back({files[i], labels, 0, 0});
  }
  return split;
}

} // namespace troupe
