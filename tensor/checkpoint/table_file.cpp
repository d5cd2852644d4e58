#include "tensor/checkpoint/table_file.hpp"

#include <cstring>

namespace troupe {

namespace {

std::string layout_of(const embedding_table_config& c) {
  return "dim=" + std::to_string(c.dim) + " buckets=" + std::to_string(c.buckets.count)
         + " bucket_seed=" + std::to_string(c.buckets.seed)
         + " optimizer=" + name_of(c.optimizer.kind)
         + (c.kind == table_kind::fixed
              ? " kind=fixed rows=" + std::to_string(c.rows) + " partition=" + name_of(c.partition)
              : "");
}

} // namespace

table_snapshot::table_snapshot(const embedding_table& table)
  : prefix_("emb/" + table.config().name + "/"), layout_(layout_of(table.config())),
    dim_(table.dim()), slot_names_(sparse_slot_names(table.config().optimizer.kind)) {
  // Field-major as the file wants it: a row's value goes to fields_[0],
  // its slots to fields_[1..], so the rows are copied once.
  fields_.resize(1 + slot_names_.size());
  // Reserved once: growing vectors of gigabytes by doubling copies them
  // again and again while the shard is paused. Rows added meanwhile (none
  // between two updates) would only cost a regrowth.
  auto rows = table.rows();
  keys_.reserve(rows);
  for (auto& field : fields_)
    field.reserve(rows * dim_);
  frequencies_.reserve(rows);
  last_updates_.reserve(rows);
  bucket_rows_.reserve(table.config().buckets.count);
  for (uint32_t b = 0; b < table.config().buckets.count; ++b) {
    size_t before = keys_.size();
    table.visit(b, [&](int64_t key, const float* row, row_counters c) {
      keys_.push_back(key);
      for (auto& field : fields_) {
        field.insert(field.end(), row, row + dim_);
        row += dim_;
      }
      frequencies_.push_back(c.frequency);
      last_updates_.push_back(c.last_update);
    });
    bucket_rows_.push_back(static_cast<uint32_t>(keys_.size() - before));
  }
}

std::vector<safetensors_writer::entry> table_snapshot::entries() const {
  auto n = static_cast<int64_t>(keys_.size());
  std::vector<safetensors_writer::entry> out = {{prefix_ + "keys", {n}, element_type::i64},
                                                {prefix_ + "values", {n, dim_}}};
  for (auto& slot : slot_names_)
    out.push_back({prefix_ + slot, {n, dim_}});
  out.push_back({prefix_ + "frequencies", {n}, element_type::u32});
  out.push_back({prefix_ + "last_updates", {n}, element_type::u32});
  out.push_back(
    {prefix_ + "bucket_rows", {static_cast<int64_t>(bucket_rows_.size())}, element_type::u32});
  return out;
}

std::pair<std::string, std::string> table_snapshot::metadata() const {
  return {prefix_.substr(0, prefix_.size() - 1), layout_};
}

std::vector<std::pair<const void*, size_t>> table_snapshot::blocks() const {
  std::vector<std::pair<const void*, size_t>> out;
  out.emplace_back(keys_.data(), keys_.size() * sizeof(int64_t));
  for (auto& field : fields_)
    out.emplace_back(field.data(), field.size() * sizeof(float));
  out.emplace_back(frequencies_.data(), frequencies_.size() * sizeof(uint32_t));
  out.emplace_back(last_updates_.data(), last_updates_.size() * sizeof(uint32_t));
  out.emplace_back(bucket_rows_.data(), bucket_rows_.size() * sizeof(uint32_t));
  return out;
}

void table_snapshot::append_to(safetensors_writer& writer) const {
  for (auto [data, bytes] : blocks())
    writer.append(data, bytes);
}

size_t restore_table_rows(const safetensors_file& file,
                          const std::vector<embedding_table*>& shards) {
  embedding_table* any = nullptr;
  for (auto* t : shards)
    any = any ? any : t;
  if (!any)
    return 0;
  const auto& config = any->config();
  std::string name = "emb/" + config.name;
  auto fail = [&](const std::string& why) {
    throw checkpoint_error("checkpoint table " + config.name + ": " + why);
  };
  auto layout = file.metadata().find(name);
  if (layout == file.metadata().end())
    fail("the file holds no layout for it (not saved by this table?)");
  if (layout->second != layout_of(config))
    fail("saved as '" + layout->second + "', the run's table is '" + layout_of(config)
         + "': restore with the same dim, buckets, bucket seed and optimizer");
  auto keys = file.read_i64(name + "/keys");
  auto frequencies = file.read_u32(name + "/frequencies");
  auto last_updates = file.read_u32(name + "/last_updates");
  auto bucket_rows = file.read_u32(name + "/bucket_rows");
  size_t n = keys.size();
  uint64_t listed = 0;
  for (uint32_t rows : bucket_rows)
    listed += rows;
  if (frequencies.size() != n || last_updates.size() != n || listed != n
      || bucket_rows.size() != config.buckets.count)
    fail("its keys, counters and bucket rows disagree in length");
  std::vector<tensor> fields = {file.read(name + "/values")};
  for (auto& slot : sparse_slot_names(config.optimizer.kind))
    fields.push_back(file.read(name + "/" + slot));
  for (auto& f : fields)
    if (f.shape() != shape_t{static_cast<int64_t>(n), config.dim})
      fail("a field's shape is not [" + std::to_string(n) + ", " + std::to_string(config.dim)
           + "]");
  std::vector<float> payload(any->payload_floats());
  auto count = static_cast<uint32_t>(shards.size());
  size_t restored = 0;
  for (size_t r = 0; r < n; ++r) {
    if (!config.holds(keys[r]))
      fail("key " + std::to_string(keys[r])
           + (keys[r] < 0 ? " is negative"
                          : " is past the table's " + std::to_string(config.rows) + " rows"));
    auto* table = shards[config.shard_of(keys[r], count)];
    if (!table)
      continue;
    for (size_t field = 0; field < fields.size(); ++field)
      std::memcpy(&payload[field * config.dim], fields[field].data() + r * config.dim,
                  config.dim * sizeof(float));
    table->restore(keys[r], payload.data(), {frequencies[r], last_updates[r]});
    ++restored;
  }
  return restored;
}

size_t restore_table_rows(const safetensors_file& file, embedding_table& table, uint32_t shard,
                          uint32_t shards) {
  std::vector<embedding_table*> targets(shards, nullptr);
  targets.at(shard) = &table;
  return restore_table_rows(file, targets);
}

} // namespace troupe
