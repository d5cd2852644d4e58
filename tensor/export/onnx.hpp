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

namespace troupe {

/// The serialized ModelProto. Throws troupe_error for a layer ONNX cannot
/// express here (none of the built-in or custom layers today).
std::string onnx_model(const model& net, const model_card& card, const std::vector<tensor>& params);

} // namespace troupe
