#pragma once
// How a shard's snapshot maps onto a checkpoint: each tensor a shard holds
// is a slice of a variable of the plan ("fc1/weights/part_1"), or an
// optimizer slot of one ("fc1/weights/part_1/Adam"); the manifest records
// the logical variable, the slot and the offset, so that restore can
// reassemble it onto any plan.
#include <string>
#include <vector>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/plan/training_plan.hpp"

namespace troupe {

/// The manifest entries of the tensors `names` that one shard saved into
/// `file`. Throws checkpoint_error for a name that is neither a slice of
/// the plan nor a slot of one.
std::vector<saved_tensor> describe_saved_tensors(const std::vector<planned_slice>& plan,
                                                 const std::vector<variable_spec>& variables,
                                                 const std::vector<std::string>& names,
                                                 const std::string& file);

} // namespace troupe
