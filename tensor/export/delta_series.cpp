#include "tensor/export/delta_series.hpp"

#include <algorithm>
#include <filesystem>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json_fields.hpp"

namespace troupe {

namespace {

// The step a version was made at, from its delta header or base's
// version.json.
int64_t step_of_version(const std::string& dir, int64_t version, bool delta) {
  auto path = delta ? delta_path(dir, version) : base_path(dir, version) + "/version.json";
  auto v = json::parse(read_file_bounded(path, 1 << 16));
  return json::fields{path, v, ""}.integer("step", 0, int64_t{1} << 50);
}

} // namespace

delta_series::delta_series(std::string dir, std::string card_path, int32_t base_every)
  : dir_(std::move(dir)), card_path_(std::move(card_path)), base_every_(std::max(base_every, 1)) {
}

std::string delta_series::resume(const std::string& log_dir) {
  auto listing = list_versions(dir_);
  auto newest = listing.newest();
  if (newest <= 0)
    return "serving versions in " + dir_ + ": none yet; the first will be a base";
  version_ = newest;
  bool delta = !listing.deltas.empty() && listing.deltas.back() == newest;
  step_ = step_of_version(dir_, newest, delta);
  auto checkpoint = log_dir + "/ckpt-" + std::to_string(step_);
  if (!std::filesystem::exists(checkpoint))
    return "serving versions in " + dir_ + " go on from " + std::to_string(newest) + " (step "
           + std::to_string(step_) + ", whose checkpoint is gone): the next is a base";
  auto loaded = load_model_to_export(checkpoint, card_path_);
  if (loaded.rows)
    fingerprints_.track(*loaded.rows, loaded.model.card.table_dim());
  tracking_ = true;
  auto base = std::upper_bound(listing.bases.begin(), listing.bases.end(), newest);
  deltas_since_base_ = base == listing.bases.begin()
                         ? base_every_
                         : static_cast<int32_t>(newest - *std::prev(base));
  return "serving versions in " + dir_ + " go on from " + std::to_string(newest) + " (step "
         + std::to_string(step_) + ")";
}

std::string delta_series::add(const std::string& checkpoint_dir) {
  auto loaded = load_model_to_export(checkpoint_dir, card_path_);
  auto& model = loaded.model;
  if (model.card.step == step_)
    return "";
  uint32_t dim = model.card.has_table() ? model.card.table_dim() : 0;
  auto& variables = model.net->variables();
  int64_t version = version_ + 1;
  bool comparable = tracking_;
  bool base_due = !comparable || deltas_since_base_ + 1 >= base_every_;
  tracking_ = false; // until this version is written whole
  std::string line = "version " + std::to_string(version) + " (step "
                     + std::to_string(model.card.step) + "):";
  if (comparable) {
    auto change = dim > 0 ? fingerprints_.diff(*loaded.rows, dim) : table_change{};
    auto header = write_delta(dir_, {version, version_, model.card.step}, change, dim, variables,
                              model.params);
    line += " delta of " + std::to_string(header.rows) + " row(s), "
            + std::to_string(header.deleted) + " deleted, " + std::to_string(header.bytes)
            + " bytes";
    ++deltas_since_base_;
  }
  if (base_due) {
    write_base(dir_, version, model.card, variables, model.params, loaded.rows.get());
    if (dim > 0 && !comparable)
      fingerprints_.track(*loaded.rows, dim);
    deltas_since_base_ = 0;
    line += std::string(comparable ? ";" : "") + " base of "
            + std::to_string(loaded.rows ? loaded.rows->rows() : 0) + " row(s)";
  }
  tracking_ = true;
  version_ = version;
  step_ = model.card.step;
  return line;
}

} // namespace troupe
