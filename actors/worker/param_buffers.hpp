#pragma once
// A worker's parameters and gradients, and how their storage travels: a
// pull lands in the variables' own tensors (or in a GPU model's pinned
// buffers), a push is cut from the gradients, and what a push or a pull
// leaves behind serves the next one, so a step allocates nothing once the
// first has run. Every mismatch with the plan is returned, not thrown.
//
// At a reduced wire precision (train.wire-precision) a push is packed from
// the gradients (which stay where they are) into storage that returns after
// the push, and a pull is widened from its packed values into the
// parameters; the packed storage travels the same way. With
// train.push-topk a push carries each slice's largest magnitudes, and what
// it leaves out waits in that slice's residual for the next push (dropped
// with a new plan).
#include <cstddef>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/core/wire_precision.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/plan/training_plan.hpp"

namespace troupe {

class param_buffers {
public:
  /// A new plan: `router` (which must outlive its use here) and the model's
  /// staging (null: the buffers are these host tensors).
  void reset(const slice_router& router, host_staging* staging, size_t variables,
             wire_precision precision = wire_precision::fp32, double push_topk = 0);
  wire_precision precision() const noexcept { return precision_; }
  /// Pushes carry top-k pairs (train.push-topk).
  bool sparsifies() const noexcept { return topk_ > 0; }

  host_staging* staging() const noexcept { return staging_; }
  std::vector<tensor>& params() noexcept { return params_; }
  std::vector<tensor>& grads() noexcept { return grads_; }

  /// Storage for a part's pull: its whole variables' own tensors (host
  /// buffers only; the parameters are not in use while a step pulls).
  std::vector<tensor> lend(const slice_router::shard_part& part);
  /// A part's pulled values into the parameters. What stays in `values`
  /// (copied slices, a staged model's values) serves the next pull.
  maybe_failure take(const slice_router::shard_part& part, std::vector<tensor>& values);
  /// The same for values pulled while a step computed on the parameters:
  /// their previous storage goes back into `values`, for the next pull.
  maybe_failure take_ahead(const slice_router::shard_part& part, std::vector<tensor>& values);

  /// A part's gradients, cut for its push.
  std::vector<tensor> cut(const slice_router::shard_part& part);
  /// A pushed part's whole-variable gradients back, for a later step:
  /// into the gradients now, or (pull-ahead, whose next step is computing
  /// already) kept aside until reuse_spare().
  void give_back(const slice_router::shard_part& part, std::vector<tensor>& sent, bool aside);
  /// Gradients kept aside fill the gradients a push took.
  void reuse_spare();

private:
  bool whole(size_t slice) const;
  bool packs_pulls() const noexcept { return precision_ != wire_precision::fp32; }
  bool packs_pushes() const noexcept { return packs_pulls() || sparsifies(); }
  maybe_failure gather(const slice_router::shard_part& part, std::vector<tensor>& values);
  maybe_failure widen(const slice_router::shard_part& part, const std::vector<tensor>& values);
  std::vector<tensor> pack_push(const slice_router::shard_part& part);

  const slice_router* router_ = nullptr;
  host_staging* staging_ = nullptr;
  std::vector<tensor> params_;
  std::vector<tensor> grads_;
  std::vector<tensor> spare_grads_;
  wire_precision precision_ = wire_precision::fp32;
  double topk_ = 0;
  std::vector<std::vector<float>> residual_;      // per plan slice: what top-k pushes left out
  std::vector<std::vector<tensor>> packed_spare_; // per shard: a packed push's storage, back
  std::vector<tensor> widened_;                   // a packed pull's slices, for staging or gather
};

} // namespace troupe
