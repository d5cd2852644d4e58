#include "tensor/checkpoint/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "tensor/checkpoint/json_fields.hpp"
#include "tensor/plan/partitioner.hpp"

namespace fs = std::filesystem;

namespace troupe {

namespace {

using json::fields;
using json::shape_json;

constexpr int64_t max_int = int64_t{1} << 53;

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

constexpr const char* pointer_file = "checkpoint";
constexpr const char* manifest_file = "manifest.json";
constexpr const char* prefix = "ckpt-";

} // namespace

int64_t checkpoint_step_of(const std::string& name) {
  if (name.rfind(prefix, 0) != 0 || name.size() == std::strlen(prefix))
    return -1;
  auto digits = name.substr(std::strlen(prefix));
  if (digits.size() > 15 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return -1;
  return std::stoll(digits);
}

json::value checkpoint_manifest::to_json() const {
  json::object fp;
  for (auto& [k, v] : fingerprint)
    fp.emplace(k, v);
  json::array vars, saved, file_list, updates, positions;
  for (auto& [name, shape] : variables)
    vars.emplace_back(json::object{{"name", name}, {"shape", shape_json(shape)}});
  for (auto& t : tensors)
    saved.emplace_back(json::object{{"key", t.key},
                                    {"variable", t.variable},
                                    {"slot", t.slot},
                                    {"axis", t.axis},
                                    {"offset", t.offset},
                                    {"file", t.file}});
  for (auto& f : files)
    file_list.emplace_back(
      json::object{{"name", f.name}, {"crc32", static_cast<int64_t>(f.crc32)}, {"bytes", f.bytes}});
  for (auto u : shard_updates)
    updates.emplace_back(u);
  for (auto& d : data) {
    json::object position{{"worker", d.worker}, {"epoch", d.epoch}, {"offset", d.offset}};
    if (d.share_count > 0) {
      position.emplace("share_rank", d.share_rank);
      position.emplace("share_count", d.share_count);
    }
    positions.emplace_back(std::move(position));
  }
  return json::object{{"format", "troupe-checkpoint"},
                      {"version", format_version},
                      {"step", step},
                      {"fingerprint", std::move(fp)},
                      {"variables", std::move(vars)},
                      {"tensors", std::move(saved)},
                      {"files", std::move(file_list)},
                      {"shard_updates", std::move(updates)},
                      {"data_positions", std::move(positions)}};
}

checkpoint_manifest checkpoint_manifest::from_json(const json::value& v, const std::string& path) {
  fields top{path, v, ""};
  if (v.as_object() == nullptr || top.text("format") != "troupe-checkpoint")
    fail_checkpoint(path, "not a Troupe checkpoint manifest");
  if (top.integer("version", 0, max_int) != format_version)
    fail_checkpoint(path, "manifest version " + std::to_string(top.integer("version", 0, max_int))
                            + " is not " + std::to_string(format_version)
                            + " (another Troupe release?)");
  checkpoint_manifest m;
  m.step = top.integer("step", 0, max_int);
  m.fingerprint = top.named_texts("fingerprint");
  for (auto& var : top.list("variables")) {
    fields f{path, var, "a variable "};
    m.variables.emplace_back(f.text("name"), f.shape("shape"));
  }
  for (auto& t : top.list("tensors")) {
    fields f{path, t, "a tensor "};
    saved_tensor s;
    s.key = f.text("key");
    f.where = "tensor '" + s.key + "' ";
    s.variable = f.text("variable");
    s.slot = f.text("slot");
    s.axis = static_cast<int32_t>(f.integer("axis", 0, 7));
    s.offset = f.integer("offset", 0, max_int);
    s.file = f.text("file");
    if (s.file.find('/') != std::string::npos || s.file.find("..") != std::string::npos)
      fail_checkpoint(path, f.where + "names a file outside the checkpoint: " + s.file);
    if (m.shape_of(s.variable) == nullptr)
      fail_checkpoint(path,
                      f.where + "belongs to variable '" + s.variable + "', which is not listed");
    m.tensors.push_back(std::move(s));
  }
  for (auto& file : top.list("files")) {
    fields f{path, file, "a file "};
    saved_file s{f.text("name"), static_cast<uint32_t>(f.integer("crc32", 0, 0xFFFFFFFFLL)),
                 static_cast<uint64_t>(f.integer("bytes", 0, max_int))};
    if (s.name.find('/') != std::string::npos || s.name.find("..") != std::string::npos)
      fail_checkpoint(path, "file '" + s.name + "' lies outside the checkpoint");
    m.files.push_back(std::move(s));
  }
  for (auto& u : top.list("shard_updates")) {
    auto i = u.as_int();
    if (!i || *i < 0)
      fail_checkpoint(path, "\"shard_updates\" must hold counts");
    m.shard_updates.push_back(*i);
  }
  for (auto& d : top.list("data_positions")) {
    fields f{path, d, "a data position "};
    data_position p{static_cast<int32_t>(f.integer("worker", 0, 1 << 20)),
                    static_cast<uint64_t>(f.integer("epoch", 0, max_int)),
                    static_cast<uint64_t>(f.integer("offset", 0, max_int))};
    if (d.as_object()->count("share_count") > 0) {
      p.share_count = static_cast<int32_t>(f.integer("share_count", 1, 1 << 20));
      p.share_rank = static_cast<int32_t>(f.integer("share_rank", 0, p.share_count - 1));
    }
    m.data.push_back(p);
  }
  return m;
}

const shape_t* checkpoint_manifest::shape_of(const std::string& variable) const {
  for (auto& [name, shape] : variables)
    if (name == variable)
      return &shape;
  return nullptr;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr)
    fail_checkpoint(tmp, std::string("cannot create: ") + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0
            && ::fsync(fileno(f)) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    fail_checkpoint(path, std::string("cannot write: ") + std::strerror(errno));
  sync_directory(fs::path(path).parent_path().string());
}

std::string checkpoint_dir::begin(int64_t step) const {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec)
    fail_checkpoint(root_, "cannot create the log directory: " + ec.message());
  auto staging = (fs::path(root_)
                  / (".saving-" + std::to_string(step) + "-" + std::to_string(::getpid())))
                   .string();
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec)
    fail_checkpoint(staging, "cannot create: " + ec.message());
  return staging;
}

std::string checkpoint_dir::commit(const std::string& staging, const checkpoint_manifest& manifest,
                                   int keep) const {
  write_file_atomically((fs::path(staging) / manifest_file).string(),
                        json::write(manifest.to_json()) + "\n");
  sync_directory(staging);
  auto name = prefix + std::to_string(manifest.step);
  auto final_path = (fs::path(root_) / name).string();
  std::error_code ec;
  fs::remove_all(final_path, ec); // a checkpoint of the same step from an earlier run
  fs::rename(staging, final_path, ec);
  if (ec)
    fail_checkpoint(final_path, "cannot move the finished checkpoint into place: " + ec.message());
  sync_directory(root_);
  // TensorFlow's pointer-file format, so its tools find the latest too.
  write_file_atomically((fs::path(root_) / pointer_file).string(),
                        "model_checkpoint_path: \"" + name + "\"\n");
  auto all = complete();
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i)
    fs::remove_all(all[i], ec);
  for (auto& entry : fs::directory_iterator(root_, ec)) // torn saves of dead processes
    if (entry.path().filename().string().rfind(".saving-", 0) == 0 && entry.path() != staging)
      fs::remove_all(entry.path(), ec);
  return final_path;
}

std::optional<std::string> checkpoint_dir::latest() const {
  auto path = (fs::path(root_) / pointer_file).string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    return std::nullopt;
  auto text = read_file_bounded(path, 4096);
  auto open = text.find('"'), close = text.rfind('"');
  if (text.rfind("model_checkpoint_path:", 0) != 0 || open == close)
    fail_checkpoint(path,
                    "not a checkpoint pointer file (expected model_checkpoint_path: \"ckpt-N\")");
  auto name = text.substr(open + 1, close - open - 1);
  if (checkpoint_step_of(name) < 0)
    fail_checkpoint(path, "names '" + name + "', which is not a checkpoint directory (ckpt-N)");
  return (fs::path(root_) / name).string();
}

std::vector<std::string> checkpoint_dir::complete() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(root_, ec)) {
    auto step = checkpoint_step_of(entry.path().filename().string());
    if (step >= 0 && fs::exists(entry.path() / manifest_file, ec))
      found.emplace_back(step, entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (auto& f : found)
    out.push_back(f.second);
  return out;
}

checkpoint_reader::checkpoint_reader(std::string dir) : dir_(std::move(dir)) {
  auto path = (fs::path(dir_) / manifest_file).string();
  json::value v;
  try {
    v = json::parse(read_file_bounded(path, 64u << 20));
  } catch (const json::parse_error& e) {
    fail_checkpoint(path, e.what());
  }
  manifest_ = checkpoint_manifest::from_json(v, path);
  for (auto& f : manifest_.files) {
    auto file = (fs::path(dir_) / f.name).string();
    auto [crc, bytes] = file_crc32(file);
    if (bytes != f.bytes)
      fail_checkpoint(file, "holds " + std::to_string(bytes) + " bytes, the manifest says "
                              + std::to_string(f.bytes) + " (truncated?)");
    if (crc != f.crc32)
      fail_checkpoint(file, "checksum mismatch (corrupt): CRC-32 " + std::to_string(crc)
                              + ", the manifest says " + std::to_string(f.crc32));
    files_.emplace(f.name, safetensors_file(file));
  }
  for (auto& t : manifest_.tensors) {
    auto i = files_.find(t.file);
    if (i == files_.end())
      fail_checkpoint(path,
                      "tensor '" + t.key + "' lies in file '" + t.file + "', which is not listed");
    if (i->second.entries().count(t.key) == 0)
      fail_checkpoint(dir_ + "/" + t.file, "lacks tensor '" + t.key + "' that the manifest lists");
  }
  check_layout();
  check_update_counts();
  check_values();
}

std::vector<const saved_tensor*> checkpoint_reader::layout_of(const std::string& variable,
                                                              const std::string& slot) const {
  auto* shape = manifest_.shape_of(variable);
  if (shape == nullptr)
    fail_checkpoint(dir_, "holds no variable '" + variable + "'");
  std::string what = variable + (slot.empty() ? "" : " (slot " + slot + ")");
  std::vector<const saved_tensor*> slices;
  std::vector<std::pair<int64_t, int64_t>> covered; // [offset, end) along the axis
  int32_t axis = -1;
  for (auto& t : manifest_.tensors) {
    if (t.variable != variable || t.slot != slot)
      continue;
    auto& part = files_.at(t.file).entries().at(t.key).shape;
    if (axis >= 0 && t.axis != axis)
      fail_checkpoint(dir_, what + " is split along two axes");
    axis = t.axis;
    bool fits = part.size() == shape->size()
                && (part.empty() ? axis == 0 : static_cast<size_t>(axis) < part.size());
    for (size_t d = 0; fits && d < part.size(); ++d)
      fits = static_cast<int>(d) == axis ? t.offset + part[d] <= (*shape)[d]
                                         : part[d] == (*shape)[d];
    if (!fits)
      fail_checkpoint(dir_, "slice '" + t.key + "' " + to_string(part) + " at offset "
                              + std::to_string(t.offset) + " does not fit " + what + " "
                              + to_string(*shape));
    slices.push_back(&t);
    covered.emplace_back(t.offset, t.offset + (part.empty() ? 1 : part[static_cast<size_t>(axis)]));
  }
  if (covered.empty())
    fail_checkpoint(dir_, "holds no slice of " + what);
  std::sort(covered.begin(), covered.end());
  int64_t next = 0;
  for (auto& [b, e] : covered) {
    if (b != next)
      fail_checkpoint(dir_, "the slices of " + what + " leave a gap or overlap at index "
                              + std::to_string(next));
    next = e;
  }
  auto dims = shape->empty() ? 1 : (*shape)[static_cast<size_t>(axis)];
  if (next != dims)
    fail_checkpoint(dir_, "the slices of " + what + " end at " + std::to_string(next) + " of "
                            + std::to_string(dims));
  return slices;
}

// Every variable's values and every slot saved for it tile exactly; no key
// appears twice.
void checkpoint_reader::check_layout() const {
  std::set<std::string> keys;
  for (auto& t : manifest_.tensors)
    if (!keys.insert(t.file + "/" + t.key).second)
      fail_checkpoint(dir_, "lists tensor '" + t.key + "' of " + t.file + " twice");
  for (auto& [variable, shape] : manifest_.variables) {
    layout_of(variable, "");
    for (auto& slot : slots_of(variable))
      layout_of(variable, slot);
  }
}

// A value that is not finite would train on as NaN: refused here, not when
// a shard is filled.
void checkpoint_reader::check_values() const {
  for (auto& t : manifest_.tensors) {
    auto value = files_.at(t.file).read(t.key);
    for (size_t i = 0; i < value.size(); ++i)
      if (!std::isfinite(value[i]))
        fail_checkpoint(dir_ + "/" + t.file,
                        "tensor '" + t.key + "' holds " + std::to_string(value[i]) + " at index "
                          + std::to_string(i) + " (a checkpoint of a diverged run?)");
  }
}

// A consistent checkpoint is taken when every shard holding variables has
// applied exactly `step` updates; a shard without variables none since
// its last initialisation (at most `step`).
void checkpoint_reader::check_update_counts() const {
  std::set<size_t> holding;
  for (auto& t : manifest_.tensors) {
    size_t shard = 0;
    if (std::sscanf(t.file.c_str(), "ps-%zu.safetensors", &shard) == 1)
      holding.insert(shard);
  }
  for (size_t s = 0; s < manifest_.shard_updates.size(); ++s) {
    auto updates = manifest_.shard_updates[s];
    bool holds = holding.count(s) > 0;
    if ((holds && updates != manifest_.step) || updates > manifest_.step)
      fail_checkpoint(dir_, "ps:" + std::to_string(s) + " had applied " + std::to_string(updates)
                              + " update(s) when saved, but the checkpoint claims step "
                              + std::to_string(manifest_.step) + " (not a consistent checkpoint)");
  }
  for (auto s : holding)
    if (s >= manifest_.shard_updates.size())
      fail_checkpoint(dir_, "holds tensors of ps:" + std::to_string(s)
                              + " but no update count for it (not a consistent checkpoint)");
}

tensor checkpoint_reader::assemble(const std::string& variable, const std::string& slot) const {
  tensor full(*manifest_.shape_of(variable)); // layout_of checked it exists, at open
  for (auto* t : layout_of(variable, slot)) {
    auto& file = files_.at(t->file);
    variable_slice slice;
    slice.name = t->key;
    slice.variable = variable;
    slice.axis = t->axis;
    slice.offset = t->offset;
    slice.shape = file.entries().at(t->key).shape;
    slice.full_shape = full.shape();
    insert_slice(slice, file.read(t->key), full);
  }
  return full;
}

std::vector<std::string> checkpoint_reader::slots_of(const std::string& variable) const {
  std::vector<std::string> out;
  for (auto& t : manifest_.tensors)
    if (t.variable == variable && !t.slot.empty()
        && std::find(out.begin(), out.end(), t.slot) == out.end())
      out.push_back(t.slot);
  return out;
}

std::string read_file_bounded(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail_checkpoint(path, "cannot open");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > limit)
      fail_checkpoint(path,
                      "larger than " + std::to_string(limit) + " bytes; not what it should be");
  }
  return text;
}

} // namespace troupe
