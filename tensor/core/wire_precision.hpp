#pragma once
// Tensors on the wire at reduced precision (train.wire-precision): a
// worker's pushed gradients and pulled values travel as 16-bit floats, two
// in each float of a packed tensor (shape {ceil(n/2)}), and are widened
// back to fp32 at the far end; the shards keep fp32 values and slots. bf16
// keeps fp32's range with 8 bits of mantissa; fp16 keeps 11 bits but
// saturates at +-65504 (a finite value never becomes infinite here). Both
// round to nearest even. Written once for every path (BASP and bulk,
// worker and shard). Free of CAF.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// Values cross the wire as their int32_t (a message field): never renumber.
enum class wire_precision : int32_t { fp32 = 0, bf16 = 1, fp16 = 2 };
TROUPE_ENUM_NAMES(wire_precision, {wire_precision::fp32, "fp32"}, {wire_precision::bf16, "bf16"},
                  {wire_precision::fp16, "fp16"});

/// The precision a message names, or nullopt for a number outside the enum.
std::optional<wire_precision> wire_precision_of(int32_t code) noexcept;

/// Floats of storage that `count` values take on the wire.
size_t packed_floats(size_t count, wire_precision precision) noexcept;

/// `count` values into `out` (resized to {packed_floats}, its storage
/// reused). fp32 copies them.
void pack(const float* values, size_t count, wire_precision precision, tensor& out);

/// A packed tensor back into `count` floats at `out`; refused (nothing
/// written) when its size is not the packed size of `count` values.
maybe_failure unpack(const tensor& packed, wire_precision precision, float* out, size_t count);

} // namespace troupe
