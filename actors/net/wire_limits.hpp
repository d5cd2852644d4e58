#pragma once
// How much one tensor, and one bulk-path frame, may announce before anything
// is allocated for it: the same limits for BASP messages (protocol/wire.hpp)
// and the bulk path. Process-wide; free of CAF.
#include <cstddef>
#include <cstdint>

namespace troupe {

/// The most elements a tensor arriving over the wire may have: troupe-node
/// sets it to the model's largest variable; 2^28 until then. Every tensor is
/// checked against it, and against the bytes its message really carries,
/// before anything is allocated for it.
void set_max_wire_elements(size_t elements) noexcept;
size_t max_wire_elements() noexcept;

/// The most bytes of tensors one bulk-path frame may carry: troupe-node sets
/// it to the model's variables' total; 2^32 until then.
void set_max_frame_bytes(uint64_t bytes) noexcept;
uint64_t max_frame_bytes() noexcept;

} // namespace troupe
