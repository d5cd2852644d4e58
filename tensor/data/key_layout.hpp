#pragma once
// How an example of an embedding model lies in a row of floats, so that
// categorical keys travel through the same readers, shuffle buffers,
// prefetch queues and batches as dense features: the dense values first,
// then `fields` fields of `keys_per_field` key slots each. A slot is four
// floats: the key in three 22-bit parts (each exact in a float, never a NaN)
// and its weight. An unused slot (an empty field, a shorter libsvm line)
// holds key -1 and weight 0.
#include <cstdint>

namespace troupe {

struct key_layout {
  int64_t dense = 0;          ///< dense values per example
  int64_t fields = 0;         ///< categorical fields; 0: a dense data set
  int64_t keys_per_field = 0; ///< key slots per field

  static constexpr int64_t floats_per_key = 4;
  static constexpr int64_t no_key = -1;

  bool sparse() const noexcept { return fields > 0; }
  int64_t slots() const noexcept { return fields * keys_per_field; }
  /// Floats per example.
  int64_t width() const noexcept { return dense + slots() * floats_per_key; }
  bool operator==(const key_layout& o) const noexcept {
    return dense == o.dense && fields == o.fields && keys_per_field == o.keys_per_field;
  }
  bool operator!=(const key_layout& o) const noexcept { return !(*this == o); }
};

/// Writes key (>= 0, or no_key) and weight into slot[0..4).
inline void pack_key(int64_t key, float weight, float* slot) noexcept {
  if (key < 0) {
    slot[0] = -1.0f;
    slot[1] = slot[2] = slot[3] = 0.0f;
    return;
  }
  auto k = static_cast<uint64_t>(key);
  slot[0] = static_cast<float>(k & 0x3fffff);
  slot[1] = static_cast<float>((k >> 22) & 0x3fffff);
  slot[2] = static_cast<float>(k >> 44);
  slot[3] = weight;
}

/// The key of a slot (no_key where unused).
inline int64_t unpack_key(const float* slot) noexcept {
  if (slot[0] < 0)
    return key_layout::no_key;
  return static_cast<int64_t>(static_cast<uint64_t>(slot[0]) | static_cast<uint64_t>(slot[1]) << 22
                              | static_cast<uint64_t>(slot[2]) << 44);
}

} // namespace troupe
