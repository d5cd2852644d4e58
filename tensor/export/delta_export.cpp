#include "tensor/export/delta_export.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json_fields.hpp"

namespace troupe {

namespace {

namespace fs = std::filesystem;

constexpr const char* deleted_name = "embedding/deleted";
constexpr int64_t max_version = int64_t{1} << 50; // exact in a JSON number
constexpr size_t max_header_bytes = 1 << 16;

// FNV-1a over the row's 32-bit words: bit-exact, so -0.0 differs from 0.0.
uint64_t fingerprint(const float* row, uint32_t dim) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < dim; ++i) {
    uint32_t word;
    std::memcpy(&word, row + i, sizeof word);
    h = (h ^ word) * 0x100000001b3ull;
  }
  return h ^ (h >> 29);
}

std::string delta_label(int64_t version) {
  return "delta " + std::to_string(version);
}

[[noreturn]] void refuse(const delta_header& h, const std::string& why) {
  throw checkpoint_error(delta_label(h.version) + " (applies to version "
                         + std::to_string(h.applies_to) + "): " + why);
}

int64_t version_of_name(const std::string& name, const std::string& kind,
                        const std::string& suffix) {
  auto prefix = kind + "-";
  if (name.size() != prefix.size() + 12 + suffix.size() || name.rfind(prefix, 0) != 0
      || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 12; ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

} // namespace

json::value delta_header::to_json() const {
  return json::object{{"format", "troupe-delta"},
                      {"format_version", format_version},
                      {"version", version},
                      {"applies_to", applies_to},
                      {"step", step},
                      {"file", version_name("delta", version) + ".safetensors"},
                      {"crc32", static_cast<int64_t>(crc32)},
                      {"bytes", static_cast<int64_t>(bytes)},
                      {"rows", static_cast<int64_t>(rows)},
                      {"deleted", static_cast<int64_t>(deleted)}};
}

delta_header delta_header::from_json(const json::value& v, const std::string& path) {
  json::fields top{path, v, ""};
  if (v.as_object() == nullptr || top.text("format") != "troupe-delta")
    fail_checkpoint(path, "not a Troupe delta header (delta-<version>.json)");
  if (top.integer("format_version", 0, 1 << 30) != format_version)
    fail_checkpoint(path, "delta format "
                            + std::to_string(top.integer("format_version", 0, 1 << 30)) + " is not "
                            + std::to_string(format_version) + " (another Troupe release?)");
  delta_header h;
  h.version = top.integer("version", 1, max_version);
  h.applies_to = top.integer("applies_to", 0, max_version);
  h.step = top.integer("step", 0, max_version);
  h.crc32 = static_cast<uint32_t>(top.integer("crc32", 0, 0xffffffffll));
  h.bytes = static_cast<uint64_t>(top.integer("bytes", 0, max_version));
  h.rows = static_cast<uint64_t>(top.integer("rows", 0, max_version));
  h.deleted = static_cast<uint64_t>(top.integer("deleted", 0, max_version));
  if (h.applies_to != h.version - 1)
    fail_checkpoint(path, "delta " + std::to_string(h.version) + " says it applies to version "
                            + std::to_string(h.applies_to)
                            + "; a delta applies to the version "
                              "just before it");
  return h;
}

table_change row_fingerprints::diff(const table_rows& rows, uint32_t dim) {
  table_change change;
  uint64_t pass = ++pass_;
  rows.for_each_range([&](const int64_t* keys, const float* values, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const float* row = values + i * dim;
      auto print = fingerprint(row, dim);
      auto [at, fresh] = rows_.try_emplace(keys[i], entry{print, pass});
      if (!fresh && at->second.fingerprint == print) {
        at->second.pass = pass;
        continue;
      }
      at->second = {print, pass};
      change.keys.push_back(keys[i]);
      change.values.insert(change.values.end(), row, row + dim);
    }
  });
  for (auto at = rows_.begin(); at != rows_.end();)
    if (at->second.pass != pass) {
      change.deleted.push_back(at->first);
      at = rows_.erase(at);
    } else {
      ++at;
    }
  std::sort(change.deleted.begin(), change.deleted.end());
  return change;
}

void row_fingerprints::track(const table_rows& rows, uint32_t dim) {
  rows_.clear();
  rows_.reserve(rows.rows());
  uint64_t pass = ++pass_;
  rows.for_each_range([&](const int64_t* keys, const float* values, size_t n) {
    for (size_t i = 0; i < n; ++i)
      rows_[keys[i]] = {fingerprint(values + i * dim, dim), pass};
  });
}

std::string version_name(const char* kind, int64_t version) {
  char name[40];
  std::snprintf(name, sizeof name, "%s-%012lld", kind, static_cast<long long>(version));
  return name;
}

std::string base_path(const std::string& dir, int64_t version) {
  return dir + "/" + version_name("base", version);
}

std::string delta_path(const std::string& dir, int64_t version) {
  return dir + "/" + version_name("delta", version) + ".json";
}

delta_header write_delta(const std::string& dir, delta_header header, const table_change& change,
                         uint32_t dim, const std::vector<variable_spec>& variables,
                         const std::vector<tensor>& values) {
  fs::create_directories(dir);
  auto n = static_cast<int64_t>(change.keys.size());
  std::vector<safetensors_writer::entry> entries;
  if (dim > 0) {
    entries.push_back({table_keys_name, {n}, element_type::i64});
    entries.push_back({table_values_name, {n, static_cast<int64_t>(dim)}, element_type::f32});
    entries.push_back(
      {deleted_name, {static_cast<int64_t>(change.deleted.size())}, element_type::i64});
  }
  for (auto& v : variables)
    entries.push_back({v.name, v.shape, element_type::f32});
  auto name = version_name("delta", header.version);
  auto path = dir + "/" + name + ".safetensors";
  std::pair<uint32_t, uint64_t> sum;
  {
    safetensors_writer writer(path + ".tmp", entries,
                              {{"format", "troupe-delta"},
                               {"version", std::to_string(header.version)},
                               {"applies_to", std::to_string(header.applies_to)}});
    if (dim > 0) {
      writer.append(change.keys.data(), change.keys.size() * sizeof(int64_t));
      writer.append(change.values.data(), change.values.size() * sizeof(float));
      writer.append(change.deleted.data(), change.deleted.size() * sizeof(int64_t));
    }
    for (auto& v : values)
      writer.append(v);
    sum = writer.finish();
  }
  fs::rename(path + ".tmp", path);
  header.crc32 = sum.first;
  header.bytes = sum.second;
  header.rows = change.keys.size();
  header.deleted = change.deleted.size();
  write_file_atomically(dir + "/" + name + ".json", json::write(header.to_json()) + "\n");
  return header;
}

namespace {

void write_version_file(const std::string& dir, int64_t version, int64_t step) {
  write_file_atomically(
    dir + "/version.json",
    json::write(json::object{{"format", "troupe-base"}, {"version", version}, {"step", step}})
      + "\n");
}

} // namespace

void write_served(const std::string& dir, const served_model& served) {
  auto& m = served.model;
  auto rows = m.table ? rows_of_table(m.table) : nullptr;
  write_model_export(dir, m.card, m.net->variables(), m.params, rows.get());
  write_version_file(dir, served.version, m.card.step);
}

std::string write_base(const std::string& dir, int64_t version, const model_card& card,
                       const std::vector<variable_spec>& variables,
                       const std::vector<tensor>& values, const table_rows* table) {
  auto final_path = base_path(dir, version);
  auto staging = final_path + ".tmp";
  fs::remove_all(staging);
  write_model_export(staging, card, variables, values, table);
  write_version_file(staging, version, card.step);
  fs::remove_all(final_path);
  fs::rename(staging, final_path);
  return final_path;
}

served_model read_base(const std::string& base_dir) {
  served_model out;
  auto path = base_dir + "/version.json";
  auto v = json::parse(read_file_bounded(path, max_header_bytes));
  json::fields top{path, v, ""};
  if (v.as_object() == nullptr || top.text("format") != "troupe-base")
    fail_checkpoint(path, "not a Troupe base's version file");
  out.version = top.integer("version", 0, max_version);
  auto named = version_of_name(fs::path(base_dir).filename().string(), "base", "");
  if (named >= 0 && named != out.version)
    fail_checkpoint(path, "says version " + std::to_string(out.version) + ", its directory "
                            + std::to_string(named));
  out.model = read_model_export(base_dir);
  return out;
}

model_delta read_delta(const std::string& header_path, const exported_model& model) {
  model_delta out;
  out.header = delta_header::from_json(
    json::parse(read_file_bounded(header_path, max_header_bytes)), header_path);
  auto& h = out.header;
  auto file = fs::path(header_path).parent_path()
              / (version_name("delta", h.version) + ".safetensors");
  if (!fs::exists(file))
    refuse(h, file.string() + " is missing");
  auto [crc, bytes] = file_crc32(file.string());
  if (crc != h.crc32 || bytes != h.bytes)
    refuse(h, file.string() + " has CRC-32 " + std::to_string(crc) + " and " + std::to_string(bytes)
                + " bytes, its header says " + std::to_string(h.crc32) + " and "
                + std::to_string(h.bytes) + ": damaged or replaced; refused");
  safetensors_file weights(file.string());
  if (model.card.has_table()) {
    auto dim = static_cast<int64_t>(model.card.table_dim());
    out.change.keys = weights.read_i64(table_keys_name);
    auto values = weights.read(table_values_name);
    if (values.shape() != shape_t{static_cast<int64_t>(out.change.keys.size()), dim})
      refuse(h, "its values have shape " + to_string(values.shape()) + ", expected ["
                  + std::to_string(out.change.keys.size()) + ", " + std::to_string(dim) + "]");
    if (values.first_non_finite() != values.size())
      refuse(h, "a row's value is not finite (NaN or infinite); refused");
    out.change.values.assign(values.data(), values.data() + values.size());
    out.change.deleted = weights.read_i64(deleted_name);
    for (auto* keys : {&out.change.keys, &out.change.deleted})
      for (int64_t key : *keys)
        if (!model.table->config().holds(key))
          refuse(h, "it names key " + std::to_string(key)
                      + (key < 0 ? ", negative" : ", past the table's fixed size"));
  }
  for (auto& var : model.net->variables()) {
    auto it = weights.entries().find(var.name);
    if (it == weights.entries().end())
      refuse(h, "it lacks " + var.name + ", which the network needs");
    if (it->second.shape != var.shape)
      refuse(h, var.name + " has shape " + to_string(it->second.shape) + ", the network's "
                  + to_string(var.shape));
    out.params.push_back(weights.read(var.name));
    if (out.params.back().first_non_finite() != out.params.back().size())
      refuse(h, var.name + " holds a value that is not finite (NaN or infinite); refused");
  }
  return out;
}

void apply_delta(served_model& served, const model_delta& delta) {
  auto& h = delta.header;
  if (h.applies_to != served.version)
    refuse(h, "the model is at version " + std::to_string(served.version)
                + (h.applies_to > served.version
                     ? ": versions " + std::to_string(served.version + 1) + ".."
                         + std::to_string(h.applies_to) + " are missing"
                     : ": it is older than the model"));
  auto& m = served.model;
  if (m.table) {
    auto dim = m.table->dim();
    for (size_t i = 0; i < delta.change.keys.size(); ++i)
      m.table->restore(delta.change.keys[i], delta.change.values.data() + i * dim, {});
    m.table->erase(delta.change.deleted.data(), delta.change.deleted.size());
  }
  m.params = delta.params;
  m.card.step = h.step;
  served.version = h.version;
}

int64_t version_listing::newest() const {
  int64_t v = -1;
  if (!bases.empty())
    v = bases.back();
  if (!deltas.empty())
    v = std::max(v, deltas.back());
  return v;
}

version_listing list_versions(const std::string& dir) {
  version_listing out;
  std::error_code error;
  for (auto& entry : fs::directory_iterator(dir, error)) {
    auto name = entry.path().filename().string();
    if (auto v = version_of_name(name, "base", ""); v >= 0 && entry.is_directory())
      out.bases.push_back(v);
    else if (auto d = version_of_name(name, "delta", ".json"); d >= 0)
      out.deltas.push_back(d);
  }
  std::sort(out.bases.begin(), out.bases.end());
  std::sort(out.deltas.begin(), out.deltas.end());
  return out;
}

served_model load_version(const std::string& dir, int64_t upto, std::string* refusal) {
  auto listing = list_versions(dir);
  auto base = std::upper_bound(listing.bases.begin(), listing.bases.end(), upto);
  if (base == listing.bases.begin())
    fail_checkpoint(dir, "holds no base at or before version " + std::to_string(upto)
                           + " (base-<version>/, written by a chief with export.delta-interval)");
  auto served = read_base(base_path(dir, *std::prev(base)));
  for (int64_t v : listing.deltas)
    if (v > served.version && v <= upto) {
      if (v != served.version + 1)
        break; // a gap: the newest version the chain reaches
      try {
        apply_delta(served, read_delta(delta_path(dir, v), served.model));
      } catch (const checkpoint_error& e) {
        if (!refusal)
          throw;
        *refusal = e.what();
        break;
      }
    }
  return served;
}

} // namespace troupe
