#pragma once
// The models of categorical data (train.model = lr, fm, mf, deepfm), over
// examples laid out by key_layout: dense values, then fields of keys. They
// look up one embedding table whose row per key is [w | v_1 .. v_d]: w the
// key's linear weight, v its factors (d = model.embedding-dim; lr has none).
//   lr:      y = b + Σ_j u_j x_j + Σ_o a_o w_o
//   fm:      lr + ½ (|Σ_o a_o v_o|² − Σ_o a_o² |v_o|²)   (Rendle's FM)
//   mf:      fm over two fields (user, item): b + w_u + w_i + v_u·v_i,
//            biased matrix factorisation
//   deepfm:  fm + an MLP (ReLU) over [Σ_{o∈f} a_o v_o per field | x]
// o runs over a batch's key occurrences (a_o its weight, 1 but for
// libsvm), x over the dense values, u are dense weights. Classification is
// binary (a logit, log loss); regression predicts y (mean squared error).
// The dense variables (b, u, the MLP) live on the shards like any other.
#include <memory>

#include "tensor/nn/model.hpp"

namespace troupe {

/// What every model with an embedding table needs of `options`: categorical
/// data, two classes where it classifies, one vocabulary size per field for
/// a fixed-size table; throws troupe_error naming `model` and the problem.
void check_table_options(const std::string& model, const model_options& options);

/// lr, fm, mf or deepfm for `options` (options.keys must hold fields);
/// throws troupe_error naming the problem.
std::unique_ptr<model> make_sparse_model(model_kind kind, const model_options& options);

} // namespace troupe
