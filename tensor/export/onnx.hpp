#pragma once
// ONNX export of a trained model, hand-encoded (the few protobuf messages of
// onnx.proto: ModelProto, GraphProto, NodeProto, AttributeProto,
// TensorProto, ValueInfoProto), so that no ONNX or protobuf library is
// needed to build Troupe; docs/export.md says why. IR version 7, opset 13.
// The graph takes raw examples, [N, ...one example's shape], applies the
// card's normalisation, runs the network (NHWC inputs are transposed to
// ONNX's NCHW around convolutions and pooling, and back before flattening,
// so the dense weights keep their order) and outputs "probabilities"
// (softmax; classification) or "value" (regression).
#include <string>
#include <vector>

#include "tensor/export/model_export.hpp"
#include "tensor/sparse/embedding_table.hpp"

namespace troupe {

/// The serialized ModelProto. Throws troupe_error for a layer ONNX cannot
/// express here (none of the built-in or custom layers today).
std::string onnx_model(const model& net, const model_card& card, const std::vector<tensor>& params);

/// The ModelProto of a model over a fixed-size embedding table (lr, fm, mf,
/// deepfm, or a custom network over an embedding layer; one key per field):
/// inputs "ids", int64 [N, fields] (each field's row within its vocabulary,
/// as embedding.id-mapping gives it; -1 where an example has no value) and,
/// with dense values, "dense", float [N, dense] (as Troupe's reader gives
/// them, before data.normalize, which the graph applies). The whole table
/// [rows, dim] is an initializer (rows never pushed at their initial value),
/// looked up with Gather. Throws troupe_error naming what it cannot
/// express: a hash table, several keys per field, a table above 2^28 floats
/// (or none given: `table` null).
std::string onnx_table_model(const model_card& card, const std::vector<tensor>& params,
                             const embedding_table* table);

} // namespace troupe
