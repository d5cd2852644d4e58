#include "tensor/sparse/keys.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace troupe {

uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

int64_t category_key(std::string_view value) {
  // At most 15 digits, so the id (below 10^15 < 2^50) cannot overflow.
  bool plain = !value.empty() && value.size() <= 15 && (value.size() == 1 || value[0] != '0')
               && std::all_of(value.begin(), value.end(),
                              [](char c) { return c >= '0' && c <= '9'; });
  if (plain) {
    int64_t id = 0;
    for (char c : value)
      id = id * 10 + (c - '0');
    if (id <= max_plain_id)
      return id;
  }
  return (int64_t{1} << 48) | static_cast<int64_t>(hash_bytes(value) & ((uint64_t{1} << 47) - 1));
}

int64_t field_key(uint32_t field, std::string_view value) {
  if (field >= max_shared_fields)
    throw troupe_error("field " + std::to_string(field) + " is past the "
                       + std::to_string(max_shared_fields) + " fields a table may share");
  return (int64_t{field + 1} << 49) | category_key(value);
}

uint32_t bucket_layout::bucket_of(int64_t key) const {
  auto bits = static_cast<unsigned>(__builtin_ctz(count));
  if (bits == 0)
    return 0;
  return static_cast<uint32_t>(mix64(static_cast<uint64_t>(key) ^ seed) >> (64 - bits));
}

uint32_t bucket_layout::shard_of_bucket(uint32_t bucket, uint32_t shards) const {
  return static_cast<uint32_t>(uint64_t{bucket} * shards / count);
}

maybe_failure bucket_layout::check() const {
  if (count == 0 || count > (1u << 20) || (count & (count - 1)) != 0)
    return failure{errc::invalid_setting,
                   "embedding buckets = " + std::to_string(count)
                     + " must be a power of two from 1 to 1048576 (1024 is the default)"};
  return std::nullopt;
}

part_row locate(partition_strategy strategy, int64_t id, int64_t rows, int64_t parts) {
  if (parts < 1 || rows < 0 || id < 0 || id >= rows)
    throw troupe_error("embedding id " + std::to_string(id) + " is outside the table's "
                       + std::to_string(rows) + " rows (or parts " + std::to_string(parts)
                       + " < 1)");
  if (strategy == partition_strategy::mod)
    return {id % parts, id / parts};
  // embedding_ops.py, partition_strategy == "div".
  int64_t per_part = rows / parts;
  int64_t extras = rows % parts;
  int64_t part = per_part == 0 ? id / (per_part + 1)
                               : std::max(id / (per_part + 1), (id - extras) / per_part);
  int64_t row = part < extras ? id % (per_part + 1) : (id - extras) % per_part;
  return {part, row};
}

fixed_vocabulary::fixed_vocabulary(std::vector<int64_t> sizes, id_mapping mapping)
  : sizes_(std::move(sizes)), mapping_(mapping) {
  for (size_t f = 0; f < sizes_.size(); ++f) {
    if (sizes_[f] < 1 || sizes_[f] > max_plain_id + 1 - rows_)
      throw troupe_error("embedding.vocabulary[" + std::to_string(f)
                         + "] = " + std::to_string(sizes_[f])
                         + ": each field needs at least one row, and all together at most 2^48");
    offsets_.push_back(rows_);
    rows_ += sizes_[f];
  }
}

int64_t fixed_vocabulary::row_of(int64_t key, uint32_t field) const {
  if (field >= sizes_.size())
    throw data_error("a key of field " + std::to_string(field) + ", but embedding.vocabulary names "
                     + std::to_string(sizes_.size()) + " field(s)");
  // field_key's prefix off: the value's own key (category_key).
  auto value = static_cast<int64_t>(static_cast<uint64_t>(key) & ((uint64_t{1} << 49) - 1));
  auto size = sizes_[field];
  if (mapping_ == id_mapping::hash)
    return offsets_[field]
           + static_cast<int64_t>(mix64(static_cast<uint64_t>(value))
                                  % static_cast<uint64_t>(size));
  if (value > max_plain_id) // a hashed string: 2^48 | hash
    return offsets_[field] + (value & max_plain_id) % size;
  if (value >= size)
    throw data_error("field " + std::to_string(field) + " holds id " + std::to_string(value)
                     + ", outside its " + std::to_string(size)
                     + " rows: raise embedding.vocabulary[" + std::to_string(field)
                     + "] above the largest id, set embedding.id-mapping = \"hash\", or use "
                       "embedding.kind = \"hash\"");
  return offsets_[field] + value;
}

namespace {

// A uniform double in (0, 1) from counter `n` of stream `base`.
double unit_draw(uint64_t base, uint64_t n) {
  uint64_t bits = mix64(base + (n + 1) * 0x9e3779b97f4a7c15ULL);
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// Two standard normals from counters 2p and 2p+1 (Box-Muller in float,
// both halves: one logarithm and one sincos for two elements).
void normal_pair(uint64_t base, uint64_t p, float pair[2]) {
  float radius = std::sqrt(-2.0f * std::log(static_cast<float>(unit_draw(base, 2 * p))));
  ::sincosf(static_cast<float>(2.0 * M_PI * unit_draw(base, 2 * p + 1)), &pair[1], &pair[0]);
  pair[0] *= radius;
  pair[1] *= radius;
}

// Elements 2p and 2p+1 take pair p's cosine and sine halves. A truncated
// element redraws from pairs p + H, p + 2H, ... (H past every first pair)
// and keeps its half, so its value never depends on another element's
// redraws.
void normal_row(uint64_t base, bool truncated, double scale, float* out, uint32_t dim) {
  const uint64_t stride = dim / 2 + 1;
  for (uint32_t j = 0; j < dim; j += 2) {
    float pair[2];
    normal_pair(base, j / 2, pair);
    for (uint32_t half = 0; half < 2 && j + half < dim; ++half) {
      float v = pair[half];
      for (uint64_t p = j / 2; truncated && std::abs(v) > 2.0f;) {
        float again[2];
        normal_pair(base, p += stride, again);
        v = again[half];
      }
      out[j + half] = static_cast<float>(v * scale);
    }
  }
}

} // namespace

void initial_row(const row_init& init, uint64_t table, int64_t key, float* out, uint32_t dim) {
  uint64_t base = mix64(mix64(init.seed ^ 0x5bd1e9955bd1e995ULL) ^ table) ^ mix64(key);
  switch (init.kind) {
    case row_initializer::zeros:
      std::fill(out, out + dim, 0.0f);
      break;
    case row_initializer::uniform:
      for (uint32_t j = 0; j < dim; ++j)
        out[j] = static_cast<float>((2 * unit_draw(base, j) - 1) * init.scale);
      break;
    case row_initializer::normal:
    case row_initializer::truncated_normal:
      normal_row(base, init.kind == row_initializer::truncated_normal, init.scale, out, dim);
      break;
  }
}

} // namespace troupe
