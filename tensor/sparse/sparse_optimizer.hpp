#pragma once
// The sparse update rules a shard applies to the rows a push names, and only
// to them, with TF 1.x's kernels (SparseApplyAdagrad, SparseApplyFtrl,
// LazyAdamOptimizer). The caller sums duplicate keys first, as TF's
// _apply_sparse_duplicate_indices does: Adagrad and FTRL are not linear in a
// repeated row.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/error.hpp"

namespace troupe {

enum class sparse_optimizer_kind { sgd, adagrad, ftrl, lazy_adam };

TROUPE_ENUM_NAMES(sparse_optimizer_kind, {sparse_optimizer_kind::sgd, "sgd"},
                  {sparse_optimizer_kind::adagrad, "adagrad"},
                  {sparse_optimizer_kind::ftrl, "ftrl"},
                  {sparse_optimizer_kind::lazy_adam, "lazy_adam"});

struct sparse_optimizer_config {
  sparse_optimizer_kind kind = sparse_optimizer_kind::adagrad;
  double learning_rate = 0.05;
  double initial_accumulator = 0.1; ///< adagrad and ftrl, TF's default
  double l1 = 0;                    ///< ftrl
  double l2 = 0;                    ///< ftrl
  double lr_power = -0.5;           ///< ftrl, <= 0
  double beta1 = 0.9;               ///< lazy_adam
  double beta2 = 0.999;             ///< lazy_adam
  double epsilon = 1e-8;            ///< lazy_adam

  /// What is wrong, if anything (errc::invalid_setting, naming the key).
  maybe_failure check() const;
};

/// How many slot vectors of the row's dimension the rule keeps per row.
uint32_t slot_count(sparse_optimizer_kind kind);

/// The slots' names as a checkpoint writes them (TF's: "Adagrad", "Ftrl",
/// "Ftrl_1", "Adam", "Adam_1").
std::vector<std::string> sparse_slot_names(sparse_optimizer_kind kind);

/// The value a new row's slot `slot` starts at.
float slot_initial_value(const sparse_optimizer_config& config, uint32_t slot);

/// One update of one row: `value` and its `slots` (slot_count(kind) vectors
/// of `dim`, back to back) with the summed gradient `grad`. `step` is the
/// number of updates the table applied before this one (lazy Adam's t - 1).
void apply_sparse_row(const sparse_optimizer_config& config, float* value, float* slots,
                      const float* grad, uint32_t dim, int64_t step);

} // namespace troupe
