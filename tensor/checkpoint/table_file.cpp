#include "tensor/checkpoint/table_file.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
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

// "dim=16 buckets=1024 bucket_seed=0 ...": the value of `name`, or "".
std::string layout_field(const std::string& layout, const std::string& name) {
  auto at = (" " + layout).find(" " + name + "=");
  if (at == std::string::npos)
    return {};
  auto begin = at + name.size() + 1;
  return layout.substr(begin, layout.find(' ', begin) - begin);
}

} // namespace

saved_layout read_saved_layout(const safetensors_file& file, const std::string& table,
                               const std::string& where) {
  auto it = file.metadata().find("emb/" + table);
  if (it == file.metadata().end())
    throw checkpoint_error(where + ": holds table " + table + "'s rows but not its layout");
  saved_layout out;
  out.text = it->second;
  auto number = [&](const char* name) {
    auto text = layout_field(out.text, name);
    char* end = nullptr;
    errno = 0;
    auto n = text.empty() ? 0 : std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || errno != 0 || *end != '\0')
      throw checkpoint_error(where + ": the layout '" + out.text + "' has no number for " + name);
    return n;
  };
  out.dim = static_cast<uint32_t>(std::min<uint64_t>(number("dim"), UINT32_MAX));
  out.buckets.count = static_cast<uint32_t>(std::min<uint64_t>(number("buckets"), UINT32_MAX));
  out.buckets.seed = number("bucket_seed");
  out.kind = layout_field(out.text, "kind") == "fixed" ? table_kind::fixed : table_kind::hash;
  if (auto bad = out.buckets.check())
    throw checkpoint_error(where + ": " + bad->message);
  return out;
}

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

saved_table_reader::saved_table_reader(std::vector<const safetensors_file*> files,
                                       const embedding_table_config& config, uint32_t shards,
                                       size_t batch)
  : config_(config), prefix_("emb/" + config.name + "/"), batch_(std::max<size_t>(batch, 1)),
    pending_(shards), rows_out_(shards, 0),
    values_(1 + sparse_slot_names(config.optimizer.kind).size()) {
  auto fail = [&](const std::string& why) {
    throw checkpoint_error("checkpoint table " + config_.name + ": " + why);
  };
  if (shards == 0)
    fail("restored onto no shard");
  fields_.push_back("values");
  for (auto& slot : sparse_slot_names(config_.optimizer.kind))
    fields_.push_back(slot);
  for (uint32_t s = 0; s < shards; ++s)
    pending_[s].shard = s;
  // Each file's header only: its rows are read a range at a time.
  for (auto* file : files) {
    auto layout = file->metadata().find("emb/" + config_.name);
    if (layout == file->metadata().end())
      fail("the file holds no layout for it (not saved by this table?)");
    if (layout->second != layout_of(config_))
      fail("saved as '" + layout->second + "', the run's table is '" + layout_of(config_)
           + "': restore with the same dim, buckets, bucket seed and optimizer");
    auto& keys = file->find(prefix_ + "keys", element_type::i64);
    auto n = static_cast<size_t>((keys.end - keys.begin) / sizeof(int64_t));
    auto bucket_rows = file->read_u32(prefix_ + "bucket_rows");
    uint64_t listed = 0;
    for (uint32_t rows : bucket_rows)
      listed += rows;
    auto counted = [&](const char* field) {
      auto& e = file->find(prefix_ + field, element_type::u32);
      return (e.end - e.begin) / sizeof(uint32_t);
    };
    if (counted("frequencies") != n || counted("last_updates") != n || listed != n
        || bucket_rows.size() != config_.buckets.count)
      fail("its keys, counters and bucket rows disagree in length");
    for (auto& field : fields_)
      if (file->find(prefix_ + field, element_type::f32).shape
          != shape_t{static_cast<int64_t>(n), config_.dim})
        fail("a field's shape is not [" + std::to_string(n) + ", " + std::to_string(config_.dim)
             + "]");
    files_.emplace_back(file, n);
    rows_ += n;
  }
}

// The next rows of the current file, each appended to its shard's batch.
void saved_table_reader::read_range() {
  auto& [file, rows] = files_[file_];
  size_t n = std::min(batch_, rows - at_);
  size_t dim = config_.dim;
  keys_.resize(n);
  frequencies_.resize(n);
  last_updates_.resize(n);
  file->read_part(prefix_ + "keys", element_type::i64, at_ * sizeof(int64_t), n * sizeof(int64_t),
                  keys_.data());
  file->read_part(prefix_ + "frequencies", element_type::u32, at_ * sizeof(uint32_t),
                  n * sizeof(uint32_t), frequencies_.data());
  file->read_part(prefix_ + "last_updates", element_type::u32, at_ * sizeof(uint32_t),
                  n * sizeof(uint32_t), last_updates_.data());
  for (size_t f = 0; f < fields_.size(); ++f) {
    values_[f].resize(n * dim);
    file->read_part(prefix_ + fields_[f], element_type::f32, at_ * dim * sizeof(float),
                    n * dim * sizeof(float), values_[f].data());
  }
  auto shards = static_cast<uint32_t>(pending_.size());
  for (size_t r = 0; r < n; ++r) {
    int64_t key = keys_[r];
    if (!config_.holds(key))
      throw checkpoint_error(
        "checkpoint table " + config_.name + ": key " + std::to_string(key)
        + (key < 0 ? " is negative"
                   : " is past the table's " + std::to_string(config_.rows) + " rows"));
    auto& out = pending_[config_.shard_of(key, shards)];
    out.keys.push_back(key);
    out.frequencies.push_back(frequencies_[r]);
    out.last_updates.push_back(last_updates_[r]);
    for (auto& field : values_)
      out.payloads.insert(out.payloads.end(), field.begin() + static_cast<std::ptrdiff_t>(r * dim),
                          field.begin() + static_cast<std::ptrdiff_t>((r + 1) * dim));
    if (out.keys.size() == batch_) {
      ready_.push_back(std::move(out));
      out = saved_rows{};
      out.shard = ready_.back().shard;
    }
  }
  at_ += n;
}

std::optional<saved_rows> saved_table_reader::next() {
  while (ready_.empty()) {
    if (file_ < files_.size()) {
      if (at_ < files_[file_].second) {
        read_range();
      } else {
        ++file_;
        at_ = 0;
      }
      continue;
    }
    for (auto& rest : pending_)
      if (!rest.keys.empty()) {
        auto shard = rest.shard;
        ready_.push_back(std::move(rest));
        rest = saved_rows{};
        rest.shard = shard;
      }
    if (ready_.empty())
      return std::nullopt;
  }
  auto out = std::move(ready_.front());
  ready_.pop_front();
  rows_out_[out.shard] += out.keys.size();
  return out;
}

size_t restore_table_rows(const safetensors_file& file,
                          const std::vector<embedding_table*>& shards) {
  embedding_table* any = nullptr;
  for (auto* t : shards)
    any = any ? any : t;
  if (!any)
    return 0;
  constexpr size_t range = size_t{1} << 16;
  saved_table_reader reader({&file}, any->config(), static_cast<uint32_t>(shards.size()), range);
  size_t width = any->payload_floats();
  size_t restored = 0;
  while (auto rows = reader.next()) {
    auto* table = shards[rows->shard];
    if (!table)
      continue;
    for (size_t r = 0; r < rows->keys.size(); ++r)
      table->restore(rows->keys[r], rows->payloads.data() + r * width,
                     {rows->frequencies[r], rows->last_updates[r]});
    restored += rows->keys.size();
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
