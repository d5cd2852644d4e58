#include "tensor/checkpoint/table_file.hpp"

#include <cstring>
#include <utility>

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

table_snapshot::table_snapshot(embedding_table& table)
  : table_(&table), prefix_("emb/" + table.config().name + "/"), layout_(layout_of(table.config())),
    dim_(table.dim()), slot_names_(sparse_slot_names(table.config().optimizer.kind)) {
  keys_.reserve(table.rows());
  bucket_rows_.reserve(table.config().buckets.count);
  generation_ = table.freeze(keys_, bucket_rows_);
}

table_snapshot::~table_snapshot() {
  if (table_)
    table_->thaw(generation_);
}

table_snapshot::table_snapshot(table_snapshot&& other) noexcept
  : table_(std::exchange(other.table_, nullptr)), generation_(other.generation_),
    prefix_(std::move(other.prefix_)), layout_(std::move(other.layout_)), dim_(other.dim_),
    slot_names_(std::move(other.slot_names_)), keys_(std::move(other.keys_)),
    bucket_rows_(std::move(other.bucket_rows_)) {
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

// The entries in order: keys, the value and each slot (dim floats of a
// row's payload each), frequencies and last updates (the row's two counter
// words after its payload), bucket_rows.
size_t table_snapshot::row_bytes(size_t entry) const {
  size_t fields = 1 + slot_names_.size();
  if (entry == 0)
    return sizeof(int64_t);
  if (entry <= fields)
    return size_t{dim_} * sizeof(float);
  return sizeof(uint32_t);
}

void table_snapshot::copy_rows(size_t entry, size_t first, size_t n, void* out) const {
  size_t fields = 1 + slot_names_.size();
  size_t rows = entry == fields + 3 ? bucket_rows_.size() : keys_.size();
  if (entry > fields + 3 || first > rows || n > rows - first)
    throw troupe_error(prefix_ + ": rows " + std::to_string(first) + "+" + std::to_string(n)
                       + " of entry " + std::to_string(entry) + " are not in the snapshot");
  if (n == 0)
    return; // an empty table's entries: no bytes, and maybe no buffer to copy from
  if (entry == 0)
    std::memcpy(out, keys_.data() + first, n * sizeof(int64_t));
  else if (entry == fields + 3)
    std::memcpy(out, bucket_rows_.data() + first, n * sizeof(uint32_t));
  else if (entry <= fields)
    table_->read_frozen(generation_, keys_.data() + first, n,
                        static_cast<uint32_t>((entry - 1) * dim_), dim_, out);
  else // the counters follow the payload: fields * dim words
    table_->read_frozen(generation_, keys_.data() + first, n,
                        static_cast<uint32_t>(fields * dim_ + (entry - fields - 1)), 1, out);
}

void table_snapshot::append_to(safetensors_writer& writer) const {
  // In pieces, so that writing needs one piece of memory, not a field.
  constexpr size_t piece_rows = size_t{1} << 16;
  auto list = entries();
  std::vector<char> piece;
  for (size_t e = 0; e < list.size(); ++e) {
    size_t rows = static_cast<size_t>(list[e].shape.at(0));
    piece.resize(std::min(rows, piece_rows) * row_bytes(e));
    size_t first = 0;
    do {
      size_t n = std::min(piece_rows, rows - first);
      copy_rows(e, first, n, piece.data());
      writer.append_part(piece.data(), n * row_bytes(e));
      first += n;
    } while (first < rows);
  }
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
