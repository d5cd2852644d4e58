// The model card (model.json): what a trained model is, written and read
// back field by field, each part (the embedding table, the normalisation,
// the empty cells) by a function of its own.
#include <cmath>

#include "tensor/checkpoint/json_fields.hpp"
#include "tensor/export/model_export.hpp"

namespace troupe {

namespace {

using json::fields;
using json::shape_json;

template <class T>
json::array array_of(const std::vector<T>& values) {
  json::array out;
  for (auto& v : values)
    out.emplace_back(v);
  return out;
}

json::object normalize_json(const normalizer& norm) {
  json::object out{
    {"kind", name_of(norm.kind == normalization::automatic ? normalization::none : norm.kind)}};
  if (norm.kind == normalization::scale)
    out["scale"] = static_cast<double>(norm.scale);
  if (norm.kind == normalization::standardize) {
    json::array mean, stddev;
    for (size_t i = 0; i < norm.mean.size(); ++i) {
      mean.emplace_back(static_cast<double>(norm.mean[i]));
      stddev.emplace_back(1.0 / static_cast<double>(norm.inv_stddev[i]));
    }
    out["mean"] = std::move(mean);
    out["stddev"] = std::move(stddev);
  }
  return out;
}

// Empty numeric cells: the columns by name, each one's fill (0 where it is
// refused), and the refused columns and those with an indicator by index.
json::object missing_json(const missing_fills& fills) {
  json::array fill, refuse, indicator;
  for (size_t c = 0; c < fills.value.size(); ++c) {
    bool refused = std::isnan(fills.value[c]);
    fill.emplace_back(refused ? 0.0 : static_cast<double>(fills.value[c]));
    if (refused)
      refuse.emplace_back(static_cast<int64_t>(c));
    if (fills.indicator[c])
      indicator.emplace_back(static_cast<int64_t>(c));
  }
  return {{"columns", array_of(fills.column)},
          {"fill", std::move(fill)},
          {"refuse", std::move(refuse)},
          {"indicator", std::move(indicator)}};
}

json::object table_json(const model_card& card) {
  json::array sizes;
  for (auto n : card.vocabulary)
    sizes.emplace_back(n);
  json::object table{{"dense", card.keys.dense},
                     {"fields", card.keys.fields},
                     {"keys_per_field", card.keys.keys_per_field},
                     {"dim", card.embedding_dim},
                     {"deep_layers", array_of(card.deep_layers)},
                     {"initializer", name_of(card.table_init.kind)},
                     {"init_scale", card.table_init.scale},
                     {"seed", std::to_string(card.table_init.seed)}, // 64 bits: text
                     {"categorical_columns", array_of(card.categorical_columns)},
                     {"ignore_columns", array_of(card.ignore_columns)}};
  if (!card.vocabulary.empty()) {
    table.emplace("vocabulary", std::move(sizes));
    table.emplace("id_mapping", name_of(card.ids));
  }
  return table;
}

std::vector<int64_t> widths_of(const fields& f, const std::string& key, int64_t max,
                               const std::string& what) {
  std::vector<int64_t> out;
  for (auto& w : f.list(key)) {
    auto i = w.as_int();
    if (!i || *i < 1 || *i > max)
      fail_checkpoint(f.path, what);
    out.push_back(*i);
  }
  return out;
}

void read_table(const fields& e, model_card& card) {
  auto& path = e.path;
  card.keys.dense = e.integer("dense", 0, 1 << 20);
  card.keys.fields = e.integer("fields", 1, max_shared_fields);
  card.keys.keys_per_field = e.integer("keys_per_field", 1, data_limits::max_keys);
  card.embedding_dim = e.integer("dim", 0, 1024);
  card.deep_layers = widths_of(e, "deep_layers", 65536,
                               "\"embedding\".\"deep_layers\" must hold widths in 1..65536");
  auto init = enum_from_name<row_initializer>(e.text("initializer"));
  if (!init)
    fail_checkpoint(
      path, "\"embedding\".\"initializer\" must be zeros, uniform, normal or truncated_normal");
  card.table_init.kind = *init;
  auto* scale = e.get("init_scale").as_number();
  if (!scale || !(*scale >= 0) || !std::isfinite(*scale))
    fail_checkpoint(path, "\"embedding\".\"init_scale\" must be a number >= 0");
  card.table_init.scale = *scale;
  auto seed = e.text("seed");
  if (seed.empty() || seed.size() > 20 || seed.find_first_not_of("0123456789") != std::string::npos)
    fail_checkpoint(path, "\"embedding\".\"seed\" must be a decimal integer (as text)");
  try {
    card.table_init.seed = std::stoull(seed);
  } catch (const std::exception&) {
    fail_checkpoint(path, "\"embedding\".\"seed\" is above 2^64");
  }
  card.categorical_columns = e.strings("categorical_columns");
  card.ignore_columns = e.strings("ignore_columns");
  if (e.v.find("vocabulary")) {
    card.vocabulary = widths_of(e, "vocabulary", max_plain_id + 1,
                                "\"embedding\".\"vocabulary\" must hold field sizes in 1..2^48");
    auto mapping = enum_from_name<id_mapping>(e.text("id_mapping"));
    if (!mapping)
      fail_checkpoint(path, "\"embedding\".\"id_mapping\" must be identity or hash");
    card.ids = *mapping;
    if (static_cast<int64_t>(card.vocabulary.size()) != card.keys.fields)
      fail_checkpoint(path, "\"embedding\".\"vocabulary\" lists "
                              + std::to_string(card.vocabulary.size()) + " field sizes for "
                              + std::to_string(card.keys.fields) + " fields");
  }
  if (num_elements(card.input) != card.keys.width())
    fail_checkpoint(path, "\"input\" holds " + std::to_string(num_elements(card.input))
                            + " values, but the embedding layout "
                            + std::to_string(card.keys.width()));
}

void read_normalize(const fields& norm, model_card& card) {
  auto& path = norm.path;
  auto kind = enum_from_name<normalization>(norm.text("kind"));
  if (!kind || *kind == normalization::automatic)
    fail_checkpoint(path, "\"normalize\".\"kind\" must be none, scale or standardize");
  card.norm.kind = *kind;
  if (*kind == normalization::scale) {
    auto* scale = norm.get("scale").as_number();
    if (!scale || !(*scale > 0) || !std::isfinite(*scale))
      fail_checkpoint(path, "\"normalize\".\"scale\" must be a positive number");
    card.norm.scale = static_cast<float>(*scale);
  }
  if (*kind == normalization::standardize) {
    card.norm.mean = norm.numbers("mean");
    auto stddev = norm.numbers("stddev");
    // Categorical data standardizes its dense values only.
    auto features = static_cast<size_t>(card.has_table() ? card.keys.dense
                                                         : num_elements(card.input));
    if (card.norm.mean.size() != features || stddev.size() != features)
      fail_checkpoint(path, "\"normalize\" needs one mean and one stddev per feature ("
                              + std::to_string(features) + ")");
    for (float sd : stddev) {
      if (!(sd > 0))
        fail_checkpoint(path, "\"normalize\".\"stddev\" must be positive");
      card.norm.inv_stddev.push_back(1.0f / sd);
    }
  }
}

void read_missing(const fields& m, model_card& card) {
  auto& fills = card.missing;
  fills.column = m.strings("columns");
  fills.value = m.numbers("fill");
  auto columns = fills.column.size();
  if (fills.value.size() != columns)
    fail_checkpoint(m.path,
                    "\"missing\" needs one fill per column (" + std::to_string(columns) + ")");
  auto marked = [&](const std::string& key) {
    std::vector<uint8_t> out(columns, 0);
    for (auto& i : m.list(key)) {
      auto c = i.as_int();
      if (!c || *c < 0 || static_cast<size_t>(*c) >= columns)
        fail_checkpoint(m.path, "\"missing\".\"" + key + "\" must hold column indices in 0.."
                                  + std::to_string(columns) + ")");
      out[static_cast<size_t>(*c)] = 1;
    }
    return out;
  };
  auto refused = marked("refuse");
  fills.indicator = marked("indicator");
  for (size_t c = 0; c < columns; ++c)
    if (refused[c])
      fills.value[c] = std::nanf("");
}

} // namespace

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
    if (train->format == data_format::csv && !train->memory) {
      card.label_column = train->csv.label_column;
      card.missing = train->csv.fills;
    }
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
  json::object out{{"format", "troupe-model"},
                   {"version", format_version},
                   {"model", model},
                   {"layers", array_of(layers)},
                   {"input", shape_json(input)},
                   {"classes", classes},
                   {"task", name_of(task)},
                   {"label_names", array_of(label_names)},
                   {"label_column", label_column},
                   {"normalize", normalize_json(norm)},
                   {"step", step}};
  if (missing.known())
    out["missing"] = missing_json(missing);
  if (has_table())
    out["embedding"] = table_json(*this);
  return out;
}

model_card model_card::from_json(const json::value& v, const std::string& path) {
  fields top{path, v, ""};
  if (v.as_object() == nullptr || top.text("format") != "troupe-model")
    fail_checkpoint(path, "not a Troupe model card (model.json)");
  if (top.integer("version", 0, 1 << 30) != format_version)
    fail_checkpoint(path, "model card version " + std::to_string(top.integer("version", 0, 1 << 30))
                            + " is not " + std::to_string(format_version)
                            + " (another Troupe release?)");
  model_card card;
  card.model = top.text("model");
  card.layers = top.strings("layers");
  card.input = widths_of(top, "input", 65536, "\"input\" must hold dimensions in 1..65536");
  if (card.input.empty() || card.input.size() > 3)
    fail_checkpoint(path, "\"input\" must have rank 1 to 3");
  card.classes = top.integer("classes", 1, data_limits::max_classes);
  auto task = enum_from_name<objective>(top.text("task"));
  if (!task)
    fail_checkpoint(path, "\"task\" must be classification or regression");
  card.task = *task;
  card.label_names = top.strings("label_names");
  if (!card.label_names.empty() && static_cast<int64_t>(card.label_names.size()) != card.classes)
    fail_checkpoint(path, "\"label_names\" names " + std::to_string(card.label_names.size())
                            + " classes, but \"classes\" is " + std::to_string(card.classes));
  card.step = top.integer("step", 0, int64_t{1} << 53);
  if (v.find("embedding"))
    read_table(fields{path, top.get("embedding"), "embedding."}, card);
  card.label_column = top.text("label_column");
  read_normalize(fields{path, top.get("normalize"), ""}, card);
  if (v.find("missing"))
    read_missing(fields{path, top.get("missing"), "missing."}, card);
  return card;
}

} // namespace troupe
