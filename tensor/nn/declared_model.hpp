#pragma once
// A model declared by a worker's program (train.model = "declared"): its
// variables with their first values and its embedding tables, as a PyTorch
// module names them. Troupe places, initialises, updates and saves them as
// any model's; the program computes the steps. On the chief a
// declared_model stands for the network (placement, checkpoints); a
// worker's program extends it with the compute.
#include <optional>
#include <string>
#include <vector>

#include "tensor/nn/model.hpp"

namespace troupe {

/// What a worker's program declares: variables (name, shape), each one's
/// first value, and the tables it looks up (name, floats per row).
struct model_declaration {
  std::vector<variable_spec> variables;
  std::vector<tensor> initial; ///< one per variable, of its shape
  std::vector<table_spec> tables;
};

/// The limits a declaration is checked against.
namespace declaration_limits {
constexpr size_t max_variables = 4096;
constexpr size_t max_tables = 256;
constexpr size_t max_name = 256;
constexpr uint32_t max_dim = 4096;
} // namespace declaration_limits

/// What is wrong with a declaration (empty: nothing): names empty, too long,
/// repeated or shared by a variable and a table; a shape with a dimension
/// below 1; a first value of another shape or not finite; a table's dim
/// outside 1..4096; nothing declared at all.
std::vector<std::string> declaration_problems(const model_declaration& d);

/// The first way `theirs` differs from `ours` in names, shapes or tables
/// (first values aside: each program draws its own), said so that its
/// author can fix it; nullopt where they agree.
std::optional<std::string> declaration_difference(const model_declaration& ours,
                                                  const model_declaration& theirs);

/// A model of the declared variables and tables, without a compute: its
/// steps throw. Its program computes them (a subclass of its own).
class declared_model : public model {
public:
  /// Throws troupe_error with declaration_problems.
  explicit declared_model(model_declaration declaration);

  const std::string& name() const override;
  const std::vector<variable_spec>& variables() const override { return declaration_.variables; }
  const std::vector<table_spec>& tables() const override { return declaration_.tables; }
  const model_declaration* declaration() const override { return &declaration_; }
  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override;
  batch_stats evaluate(const std::vector<tensor>& params, const batch& b) override;
  void skip_training_steps(uint64_t, int64_t) override {}
  std::string describe() const override;
  std::vector<layer_desc> layers() const override { return {}; }
  shape_t input_shape() const override { return {}; }

private:
  model_declaration declaration_;
};

} // namespace troupe
