#pragma once
// How an embedding table's bucket lays out its rows: in chunks of 16, 16,
// 32, ... 1024 rows, then 1024 each (small buckets stay small, large ones
// waste at most one chunk, and growth never moves a row); each row holds
// its payload (value and slots) then two counter words.
#include <cstdint>
#include <cstring>

#include "tensor/sparse/embedding_table.hpp"

namespace troupe::row_layout {

constexpr uint32_t max_chunk_rows = 1024;

/// The chunk that holds row `row`.
inline uint32_t chunk_of(uint32_t row) {
  if (row < 16)
    return 0;
  if (row >= max_chunk_rows)
    return row / max_chunk_rows + 6;
  return static_cast<uint32_t>(31 - __builtin_clz(row)) - 3;
}

/// The first row of chunk `chunk`.
inline uint32_t chunk_start(uint32_t chunk) {
  if (chunk == 0)
    return 0;
  if (chunk >= 7)
    return (chunk - 6) * max_chunk_rows;
  return 8u << chunk;
}

inline uint32_t chunk_rows(uint32_t chunk) {
  return chunk == 0 ? 16 : chunk >= 7 ? max_chunk_rows : 8u << chunk;
}

/// The counters after a row's `payload` floats.
inline row_counters counters_of(const float* row, uint32_t payload) {
  row_counters c;
  std::memcpy(&c.frequency, row + payload, 4);
  std::memcpy(&c.last_update, row + payload + 1, 4);
  return c;
}

inline void set_counters(float* row, uint32_t payload, row_counters c) {
  std::memcpy(row + payload, &c.frequency, 4);
  std::memcpy(row + payload + 1, &c.last_update, 4);
}

} // namespace troupe::row_layout
