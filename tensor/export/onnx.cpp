#include "tensor/export/onnx.hpp"

#include <algorithm>

#include "tensor/core/protobuf.hpp"
#include "tensor/nn/layers.hpp"

namespace troupe {

namespace {

using protobuf::bytes_field;
using protobuf::int_field;

constexpr int64_t ir_version = 7;
constexpr int64_t opset = 13;
constexpr int32_t float_type = 1; // TensorProto.FLOAT
constexpr int32_t int64_type = 7; // TensorProto.INT64

// AttributeProto: name 1, f 2, i 3, ints 8, type 20 (FLOAT 1, INT 2, INTS 7).
std::string int_attribute(const std::string& name, int64_t v) {
  std::string a;
  bytes_field(a, 1, name);
  int_field(a, 3, v);
  int_field(a, 20, 2);
  return a;
}

std::string ints_attribute(const std::string& name, const std::vector<int64_t>& values) {
  std::string a;
  bytes_field(a, 1, name);
  for (auto v : values)
    int_field(a, 8, v); // unpacked, as onnx.proto (proto2) declares it
  int_field(a, 20, 7);
  return a;
}

// TensorProto: dims 1, data_type 2, name 8, raw_data 9.
std::string float_tensor(const std::string& name, const shape_t& dims, const float* data,
                         size_t count) {
  std::string t;
  for (auto d : dims)
    int_field(t, 1, d);
  int_field(t, 2, float_type);
  bytes_field(t, 8, name);
  bytes_field(t, 9, std::string(reinterpret_cast<const char*>(data), count * sizeof(float)));
  return t;
}

std::string int64_tensor(const std::string& name, const shape_t& dims,
                         const std::vector<int64_t>& data) {
  std::string t;
  for (auto d : dims)
    int_field(t, 1, d);
  int_field(t, 2, int64_type);
  bytes_field(t, 8, name);
  bytes_field(
    t, 9, std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(int64_t)));
  return t;
}

// ValueInfoProto: name 1, type 2 -> TypeProto.tensor_type 1 -> elem_type 1,
// shape 2 -> dim 1 -> dim_value 1 | dim_param 2.
std::string value_info(const std::string& name, const shape_t& dims,
                       int32_t elem_type = float_type) {
  std::string shape;
  for (size_t i = 0; i < dims.size(); ++i) {
    std::string dim;
    if (dims[i] < 0)
      bytes_field(dim, 2, "N");
    else
      int_field(dim, 1, dims[i]);
    bytes_field(shape, 1, dim);
  }
  std::string tensor_type;
  int_field(tensor_type, 1, elem_type);
  bytes_field(tensor_type, 2, shape);
  std::string type;
  bytes_field(type, 1, tensor_type);
  std::string v;
  bytes_field(v, 1, name);
  bytes_field(v, 2, type);
  return v;
}

class graph_builder {
public:
  // NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& attributes = {}, std::string output = {}) {
    if (output.empty())
      output = op + "_" + std::to_string(count_++);
    std::string n;
    for (auto& i : inputs)
      bytes_field(n, 1, i);
    bytes_field(n, 2, output);
    bytes_field(n, 3, output);
    bytes_field(n, 4, op);
    for (auto& a : attributes)
      bytes_field(n, 5, a);
    nodes_ += bytes_field_text(1, n);
    return output;
  }

  std::string initializer(const std::string& name, const shape_t& dims, const float* data,
                          size_t count) {
    initializers_ += bytes_field_text(5, float_tensor(name, dims, data, count));
    return name;
  }

  std::string int64_initializer(const std::string& name, const shape_t& dims,
                                const std::vector<int64_t>& data) {
    initializers_ += bytes_field_text(5, int64_tensor(name, dims, data));
    return name;
  }

  // GraphProto: node 1, name 2, initializer 5, input 11, output 12.
  std::string finish(const std::string& input, const shape_t& input_dims, const std::string& output,
                     const shape_t& output_dims) {
    return finish({{input, input_dims, float_type}}, output, output_dims);
  }
  struct graph_input {
    std::string name;
    shape_t dims;
    int32_t elem_type;
  };
  std::string finish(const std::vector<graph_input>& inputs, const std::string& output,
                     const shape_t& output_dims) {
    std::string g = nodes_;
    bytes_field(g, 2, "troupe");
    g += initializers_;
    for (auto& i : inputs)
      bytes_field(g, 11, value_info(i.name, i.dims, i.elem_type));
    bytes_field(g, 12, value_info(output, output_dims));
    return g;
  }

private:
  static std::string bytes_field_text(uint32_t field, const std::string& bytes) {
    std::string out;
    bytes_field(out, field, bytes);
    return out;
  }

  std::string nodes_, initializers_;
  int count_ = 0;
};

// TF's SAME padding as ONNX's explicit pads [top, left, bottom, right].
std::vector<int64_t> pads_of(const layer_desc& l) {
  if (l.pad == padding::valid)
    return {0, 0, 0, 0};
  auto h = l.input[0], w = l.input[1];
  auto top = pad_before(h, l.kernel_h, l.stride, padding::same);
  auto left = pad_before(w, l.kernel_w, l.stride, padding::same);
  auto out_h = conv_output_size(h, l.kernel_h, l.stride, padding::same);
  auto out_w = conv_output_size(w, l.kernel_w, l.stride, padding::same);
  auto total_h = std::max<int64_t>((out_h - 1) * l.stride + l.kernel_h - h, 0);
  auto total_w = std::max<int64_t>((out_w - 1) * l.stride + l.kernel_w - w, 0);
  return {top, left, total_h - top, total_w - left};
}

// The graph as it grows: the tensor the next node reads, its rank and
// whether it is in ONNX's channel-first layout.
struct graph_state {
  graph_builder g;
  std::string x = "input";
  size_t rank = 0;
  bool nchw = false;

  void to_nchw() {
    if (!nchw && rank == 4) {
      x = g.node("Transpose", {x}, {ints_attribute("perm", {0, 3, 1, 2})});
      nchw = true;
    }
  }

  // [N, features] in Troupe's (NHWC) order.
  void to_rows() {
    if (nchw) {
      x = g.node("Transpose", {x}, {ints_attribute("perm", {0, 2, 3, 1})});
      nchw = false;
    }
    if (rank != 2) {
      x = g.node("Flatten", {x}, {int_attribute("axis", 1)});
      rank = 2;
    }
  }
};

// Normalisation, with constants broadcast over one example's shape.
void add_normalization(graph_state& s, const model_card& card) {
  auto& norm = card.norm;
  auto& g = s.g;
  if (norm.kind == normalization::scale) {
    float scale = norm.scale;
    s.x = g.node("Mul", {s.x, g.initializer("scale", {1}, &scale, 1)});
  } else if (norm.kind == normalization::standardize) {
    s.x = g.node("Sub",
                 {s.x, g.initializer("mean", card.input, norm.mean.data(), norm.mean.size())});
    s.x = g.node("Mul", {s.x, g.initializer("inv_stddev", card.input, norm.inv_stddev.data(),
                                            norm.inv_stddev.size())});
  }
}

void add_dense(graph_state& s, const layer_desc& l, const tensor* p) {
  s.to_rows();
  // [in, units] stored as [units, in] with transB = 1: the form
  // other exporters write and every runtime reads.
  auto in = p[0].dim(0), units = p[0].dim(1);
  std::vector<float> transposed(p[0].size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t u = 0; u < units; ++u)
      transposed[u * in + i] = p[0][i * units + u];
  auto w = s.g.initializer(l.name + "/weights", {units, in}, transposed.data(), transposed.size());
  auto b = s.g.initializer(l.name + "/biases", p[1].shape(), p[1].data(), p[1].size());
  s.x = s.g.node("Gemm", {s.x, w, b}, {int_attribute("transB", 1)});
}

void add_conv2d(graph_state& s, const layer_desc& l, const tensor* p) {
  s.to_nchw();
  // [kh, kw, in, out] (TF's HWIO) -> [out, in, kh, kw] (ONNX's OIHW)
  auto& k = p[0];
  auto kh = k.dim(0), kw = k.dim(1), in = k.dim(2), out = k.dim(3);
  std::vector<float> oihw(k.size());
  for (int64_t y = 0; y < kh; ++y)
    for (int64_t xx = 0; xx < kw; ++xx)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o)
          oihw[((o * in + i) * kh + y) * kw + xx] = k[((y * kw + xx) * in + i) * out + o];
  auto w = s.g.initializer(l.name + "/weights", {out, in, kh, kw}, oihw.data(), oihw.size());
  auto b = s.g.initializer(l.name + "/biases", p[1].shape(), p[1].data(), p[1].size());
  s.x = s.g.node("Conv", {s.x, w, b},
                 {ints_attribute("kernel_shape", {kh, kw}),
                  ints_attribute("strides", {l.stride, l.stride}),
                  ints_attribute("pads", pads_of(l))});
}

// p: the layer's variables.
void add_layer(graph_state& s, const layer_desc& l, const tensor* p) {
  switch (l.type) {
    case layer_desc::kind::dense:
      add_dense(s, l, p);
      break;
    case layer_desc::kind::conv2d:
      add_conv2d(s, l, p);
      break;
    case layer_desc::kind::max_pool:
      s.to_nchw();
      s.x = s.g.node("MaxPool", {s.x},
                     {ints_attribute("kernel_shape", {l.kernel_h, l.kernel_w}),
                      ints_attribute("strides", {l.stride, l.stride}),
                      ints_attribute("pads", pads_of(l))});
      break;
    case layer_desc::kind::relu:
      s.x = s.g.node("Relu", {s.x});
      break;
    case layer_desc::kind::dropout: // inference: the identity
      break;
    case layer_desc::kind::flatten:
      s.to_rows();
      break;
    case layer_desc::kind::embedding:
      throw troupe_error(l.name + ": an embedding layer has no ONNX export yet");
  }
}

// ModelProto: ir_version 1, producer_name 2, producer_version 3, graph 7,
// opset_import 8 (OperatorSetIdProto: domain 1, version 2).
std::string model_proto(const std::string& graph) {
  std::string m;
  int_field(m, 1, ir_version);
  bytes_field(m, 2, "troupe");
  bytes_field(m, 3, "1");
  bytes_field(m, 7, graph);
  std::string op;
  bytes_field(op, 1, "");
  int_field(op, 2, opset);
  bytes_field(m, 8, op);
  return m;
}

} // namespace

std::string onnx_model(const model& net, const model_card& card,
                       const std::vector<tensor>& params) {
  graph_state s;
  s.rank = card.input.size() + 1;
  add_normalization(s, card);
  for (auto& l : net.layers())
    add_layer(s, l, params.data() + l.first_variable);
  s.to_rows();
  bool regression = card.task == objective::regression;
  auto output = regression ? std::string("value") : std::string("probabilities");
  if (regression)
    s.g.node("Identity", {s.x}, {}, output);
  else
    s.g.node("Softmax", {s.x}, {int_attribute("axis", 1)}, output);
  shape_t input_dims{-1};
  input_dims.insert(input_dims.end(), card.input.begin(), card.input.end());
  return model_proto(s.g.finish("input", input_dims, output, {-1, card.classes}));
}

} // namespace troupe

namespace troupe {

namespace {

// The largest table written into model.onnx whole (1 GiB of floats).
constexpr int64_t max_onnx_table_floats = int64_t{1} << 28;

// What onnx_table_model cannot express, named.
void check_table_export(const model_card& card, const embedding_table* table) {
  auto why = [&](const std::string& what) {
    throw troupe_error("no model.onnx for " + card.model + ": " + what);
  };
  if (card.vocabulary.empty())
    why("its table is a hash table (int64 keys, no fixed rows to Gather from); docs/export.md "
        "says what it exports to");
  if (card.keys.keys_per_field != 1)
    why("its fields hold several weighted keys (libsvm)");
  if (!table)
    why("its table was not loaded whole");
  if (table->config().rows * table->dim() > max_onnx_table_floats)
    why("its table of " + std::to_string(table->config().rows) + " rows is above 2^28 floats");
}

// The dense values as the model reads them: the reader's, normalised with
// the run's statistics (data.normalize applies to the dense values only).
std::string dense_input(graph_builder& g, const model_card& card) {
  auto& norm = card.norm;
  if (norm.kind == normalization::scale) {
    float scale = norm.scale;
    return g.node("Mul", {"dense", g.initializer("scale", {1}, &scale, 1)});
  }
  if (norm.kind != normalization::standardize)
    return "dense";
  auto n = static_cast<int64_t>(norm.mean.size());
  auto centred = g.node("Sub",
                        {"dense", g.initializer("mean", {n}, norm.mean.data(), norm.mean.size())});
  return g.node("Mul", {centred, g.initializer("inv_stddev", {n}, norm.inv_stddev.data(),
                                               norm.inv_stddev.size())});
}

// A custom network over the embedding layer: with one key per field every
// combiner gives the field's row itself (zeros for a missing value), so the
// network reads [each field's row | the dense values] into its layers. Its
// logits (binary: two) or value.
std::string custom_network(graph_state& s, const model_card& card,
                           const std::vector<tensor>& params, const std::string& rows,
                           const std::string& dense) {
  auto net = make_model(model_kind::custom, card.options());
  auto& g = s.g;
  auto width = card.keys.fields * static_cast<int64_t>(card.table_dim());
  s.x = g.node("Reshape", {rows, g.int64_initializer("network_shape", {2}, {-1, width})});
  if (card.keys.dense > 0)
    s.x = g.node("Concat", {s.x, dense}, {int_attribute("axis", 1)});
  s.rank = 2;
  for (auto& l : net->layers())
    if (l.type != layer_desc::kind::embedding)
      add_layer(s, l, params.data() + l.first_variable);
  s.to_rows();
  return s.x;
}

} // namespace

std::string onnx_table_model(const model_card& card, const std::vector<tensor>& params,
                             const embedding_table* loaded) {
  check_table_export(card, loaded);
  auto& table = *loaded;
  graph_state s;
  auto& g = s.g;
  auto fields = card.keys.fields, dense = card.keys.dense, factors = card.embedding_dim;
  auto rows = table.config().rows, dim = static_cast<int64_t>(table.dim());
  // The whole table, rows nobody pushed at their initial value.
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    ids[static_cast<size_t>(i)] = i;
  std::vector<float> whole(static_cast<size_t>(rows * dim));
  table.lookup(ids.data(), ids.size(), whole.data());
  auto weights = g.initializer("embedding/weights", {rows, dim}, whole.data(), whole.size());
  std::vector<int64_t> offsets;
  for (int64_t f = 0, at = 0; f < fields; ++f) {
    offsets.push_back(at);
    at += card.vocabulary[static_cast<size_t>(f)];
  }
  // ids [N, F]: -1 (no value) reads row 0, masked to zero after the Gather.
  auto zero_i = g.int64_initializer("zero_i64", {}, {0});
  auto present = g.node("Cast", {g.node("GreaterOrEqual", {"ids", zero_i})},
                        {int_attribute("to", float_type)});
  auto row_ids = g.node("Add", {g.node("Max", {"ids", zero_i}),
                                g.int64_initializer("field_offsets", {fields}, offsets)});
  auto looked_up = g.node("Gather", {weights, row_ids}, {int_attribute("axis", 0)});
  auto mask = g.node("Reshape", {present, g.int64_initializer("mask_shape", {3}, {-1, fields, 1})});
  auto e = g.node("Mul", {looked_up, mask}); // [N, F, dim]
  auto dense_x = dense > 0 ? dense_input(g, card) : std::string();
  std::vector<graph_builder::graph_input> inputs{{"ids", {-1, fields}, int64_type}};
  if (dense > 0)
    inputs.push_back({"dense", {-1, dense}, float_type});
  bool regression = card.task == objective::regression;
  if (!card.layers.empty()) {
    auto out = custom_network(s, card, params, e, dense_x);
    if (regression) {
      g.node("Identity", {out}, {}, "value");
      return model_proto(g.finish(inputs, "value", {-1, 1}));
    }
    g.node("Softmax", {out}, {int_attribute("axis", 1)}, "probabilities");
    return model_proto(g.finish(inputs, "probabilities", {-1, 2}));
  }
  auto axis1 = g.int64_initializer("axis_1", {1}, {1});
  auto reduce = [&](const std::string& x, bool keep) {
    return g.node("ReduceSum", {x, axis1}, {int_attribute("keepdims", keep ? 1 : 0)});
  };
  // bias + Σ w (+ dense · u)
  auto w = g.node("Gather", {e, zero_i}, {int_attribute("axis", 2)}); // [N, F]
  auto y = g.node("Add", {reduce(w, true), g.initializer("bias", {1}, params[0].data(), 1)});
  if (dense > 0) {
    auto u = g.initializer("dense/weights", {dense, 1}, params[1].data(), params[1].size());
    y = g.node("Add", {y, g.node("MatMul", {dense_x, u})});
  }
  if (factors > 0) {
    // ½ (‖Σ v‖² − Σ ‖v‖²)
    auto v = g.node("Slice", {e, g.int64_initializer("factor_start", {1}, {1}),
                              g.int64_initializer("factor_end", {1}, {dim}),
                              g.int64_initializer("axis_2", {1}, {2})}); // [N, F, d]
    auto s = reduce(v, false);
    auto squares = reduce(g.node("Mul", {v, v}), false);
    auto pairs = reduce(g.node("Sub", {g.node("Mul", {s, s}), squares}), true);
    float half = 0.5f;
    y = g.node("Add", {y, g.node("Mul", {pairs, g.initializer("half", {1}, &half, 1)})});
    if (card.model == "deepfm") {
      // The MLP over [each field's factors | dense], ReLU between layers.
      auto h = g.node("Reshape",
                      {v, g.int64_initializer("deep_shape", {2}, {-1, fields * factors})});
      if (dense > 0)
        h = g.node("Concat", {h, dense_x}, {int_attribute("axis", 1)});
      size_t first = dense > 0 ? 2 : 1;
      for (size_t l = 0; first + 2 * l < params.size(); ++l) {
        auto& W = params[first + 2 * l];
        auto& b = params[first + 2 * l + 1];
        auto name = "deep/" + std::to_string(l);
        h = g.node("Gemm", {h, g.initializer(name + "/weights", W.shape(), W.data(), W.size()),
                            g.initializer(name + "/bias", b.shape(), b.data(), b.size())});
        if (first + 2 * (l + 1) < params.size())
          h = g.node("Relu", {h});
      }
      y = g.node("Add", {y, h});
    }
  }
  if (regression) {
    g.node("Identity", {y}, {}, "value");
    return model_proto(g.finish(inputs, "value", {-1, 1}));
  }
  // Troupe's two logits (0, y), as troupe-predict gives them.
  auto logits = g.node("Concat", {g.node("Sub", {y, y}), y}, {int_attribute("axis", 1)});
  g.node("Softmax", {logits}, {int_attribute("axis", 1)}, "probabilities");
  return model_proto(g.finish(inputs, "probabilities", {-1, 2}));
}

} // namespace troupe
