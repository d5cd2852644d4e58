#pragma once
// A prediction request's rows as a batch for the model, and the model's
// outputs as the answer (docs/online.md#troupe-serve):
//   {"rows": [ROW, ...]}  or  {"row": ROW}
// where a ROW is what the model was trained on:
//   - a model over Criteo or libsvm data: the line, as a string (Criteo: the
//     39 fields after the label, tab-separated, or all 40; libsvm: the
//     index:value pairs, with or without a label first);
//   - a dense model: its features, an array of numbers, before
//     normalisation (the card's is applied, as in training).
// The answer: {"version": V, "step": S, "scores": [...]}, a score per row:
// the probability of class 1 (a binary classifier), every class's
// probability (more classes), or the value (regression). No HTTP here.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tensor/export/model_export.hpp"

namespace troupe::serve {

/// A request that cannot be answered as asked (HTTP 400); the message
/// names the row and what is wrong with it.
struct request_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Rows per request at most.
constexpr size_t max_rows = 65536;

/// The rows of `body` as a batch for `card`'s model. Throws request_error.
batch read_rows(const std::string& body, const model_card& card);

/// The answer to a batch of `rows` whose outputs are `outputs` (as
/// predict_batch leaves them).
std::string answer_json(const model_card& card, const tensor& outputs, size_t rows, int64_t version,
                        int64_t step);

} // namespace troupe::serve
