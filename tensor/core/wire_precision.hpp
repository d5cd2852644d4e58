#pragma once
// Tensors on the wire at reduced precision (train.wire-precision): a
// worker's pushed gradients and pulled values travel as 16-bit floats, two
// in each float of a packed tensor (shape {ceil(n/2)}), and are widened
// back to fp32 at the far end; the shards keep fp32 values and slots. bf16
// keeps fp32's range with 8 bits of mantissa; fp16 keeps 11 bits but
// saturates at +-65504 (a finite value never becomes infinite here). Both
// round to nearest even. Written once for every path (BASP and bulk,
// worker and shard). Free of CAF.
//
// A push may instead carry its gradients' k largest magnitudes
// (train.push-topk): (index, value) pairs, with error feedback on the
// worker (what is not sent now is added to its next push).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

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

/// The code a push names for top-k pairs in place of a precision's.
constexpr int32_t topk_wire_code = 3;

/// How many of `count` values a top-k push of `fraction` sends: at least
/// one of a non-empty tensor, at most all.
size_t topk_count(size_t count, double fraction) noexcept;

/// `values` + `residual` (the error feedback: resized and zeroed the first
/// time) into `out`, shape {2k}: the k = topk_count largest magnitudes as
/// (index, value) pairs, the index's bits in the pair's first float,
/// indices increasing. What was not sent stays in `residual`.
void pack_topk(const float* values, size_t count, double fraction, std::vector<float>& residual,
               tensor& out);

/// Top-k pairs back into `count` floats at `out`, zero where no pair
/// names an index; refused (nothing written) for an odd size, more pairs
/// than values, or indices that are not increasing below `count`.
maybe_failure unpack_topk(const tensor& packed, float* out, size_t count);

/// Either form by the code a message named: a wire_precision's, or
/// topk_wire_code; refused for any other code.
maybe_failure unpack_wire(const tensor& packed, int32_t code, float* out, size_t count);

} // namespace troupe
