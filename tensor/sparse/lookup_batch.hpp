#pragma once
// A worker's side of an embedding lookup, as TF computes it: the ids of a
// batch deduplicated (unique + gather), each distinct row pulled once,
// optionally clipped to max_norm, combined per bag (sum, mean, sqrtn, with
// weights), and on the way back the occurrences' gradients summed per
// distinct key (segment sum), with the count of occurrences the shard's
// frequency needs.
#include <cstdint>
#include <vector>

#include "tensor/core/enum_names.hpp"

namespace troupe {

/// The distinct keys of a batch; storage is reused from batch to batch.
class unique_keys {
public:
  /// Replaces the contents with the distinct keys of ids[n].
  void assign(const int64_t* ids, size_t n);

  const std::vector<int64_t>& keys() const { return keys_; }        ///< first-seen order
  const std::vector<uint32_t>& counts() const { return counts_; }   ///< occurrences per key
  const std::vector<uint32_t>& inverse() const { return inverse_; } ///< occurrence -> key index
  size_t size() const { return keys_.size(); }

private:
  std::vector<int64_t> keys_;
  std::vector<uint32_t> counts_;
  std::vector<uint32_t> inverse_;
  std::vector<uint32_t> slots_; ///< open-addressing index into keys_, + 1 (0: empty)
};

/// TF's combiners: sum = Σ w·e, mean = Σ w·e / Σ w, sqrtn = Σ w·e / sqrt(Σ w²).
enum class combiner { sum, mean, sqrtn };

TROUPE_ENUM_NAMES(combiner, {combiner::sum, "sum"}, {combiner::mean, "mean"},
                  {combiner::sqrtn, "sqrtn"});

/// Bags of ids in CSR form: bag b holds occurrences offsets[b] ..
/// offsets[b + 1] - 1 of the batch's ids, each with its weight (1 when
/// `weights` is empty). An empty bag combines to zeros.
struct bag_layout {
  std::vector<uint32_t> offsets; ///< bags + 1 entries, from 0
  std::vector<float> weights;    ///< empty, or one per occurrence
  size_t bags() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

/// Where each bag's combined row lies in an output: `bags_per_row` bags side
/// by side in rows of `row_floats` floats (a network's input: an example's
/// fields, then its dense values). The default packs them: bag b at b * dim.
struct combined_layout {
  size_t bags_per_row = 1;
  size_t row_floats = 0; ///< 0: bags_per_row * dim
  size_t offset(size_t bag, uint32_t dim) const {
    size_t row = row_floats ? row_floats : bags_per_row * dim;
    return bag / bags_per_row * row + bag % bags_per_row * dim;
  }
};

/// The combined rows of bag b at out + where.offset(b, dim); rows[k * dim ..]
/// is the row of distinct key k, `inverse` maps occurrences to k.
void combine_rows(combiner how, const bag_layout& bags, const std::vector<uint32_t>& inverse,
                  const float* rows, uint32_t dim, float* out, combined_layout where = {});

/// The gradient of combine_rows: row_grads[k * dim ..] (zeroed here) sums
/// what every occurrence of key k received from its bag's gradient.
/// out_grad lies as `where` says.
void combine_rows_backward(combiner how, const bag_layout& bags,
                           const std::vector<uint32_t>& inverse, const float* out_grad,
                           uint32_t dim, size_t distinct, float* row_grads,
                           combined_layout where = {});

/// TF's max_norm: each looked-up row clipped to L2 norm `max_norm` in place
/// (the stored rows stay as they are); `scales` keeps each row's factor for
/// the backward pass (1 where it was not clipped).
void clip_rows(float* rows, size_t n, uint32_t dim, float max_norm, std::vector<float>& scales);

/// The gradient through clip_rows, in place: for a clipped row e (norm |e| >
/// m), d/de of e·m/|e| applied to g is (m/|e|)(g - e (e·g)/|e|²). `rows`
/// holds the clipped rows (what the forward pass returned).
void clip_rows_backward(const float* rows, size_t n, uint32_t dim, const std::vector<float>& scales,
                        float* grads);

} // namespace troupe
