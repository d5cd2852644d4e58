#include "tensor/nn/embedding_network.hpp"

#include <algorithm>

#include "tensor/core/error.hpp"
#include "tensor/nn/batch_keys.hpp"
#include "tensor/nn/layer_spec.hpp"
#include "tensor/nn/layer_stack.hpp"
#include "tensor/nn/loss.hpp"
#include "tensor/nn/sparse_model.hpp"

namespace troupe {

namespace {

class embedding_network final : public model {
public:
  embedding_network(const model_options& options, embedding_layer_spec embedding)
    : embedding_(std::move(embedding)), keys_(options.keys),
      vocabulary_(options.vocabulary, options.ids), task_(options.task),
      dim_(static_cast<uint32_t>(embedding_.dim)),
      stack_("custom", {features()}, parse_layers(options.layers, options.seed, 1)) {
    tables_.push_back({"embedding", dim_});
    auto outputs = task_ == objective::regression ? 1 : 2;
    auto& last = stack_.last();
    if (last.variables().empty() || stack_.output_shape() != shape_t{outputs})
      throw shape_error("the last layer ('" + last.name() + "') must be a dense layer with "
                        + (task_ == objective::regression
                             ? std::string("1 unit (the predicted target)")
                             : std::string("2 units (the logits of no and yes)"))
                        + "; it outputs " + to_string(stack_.output_shape()));
  }

  const std::string& name() const override { return name_; }
  const std::vector<variable_spec>& variables() const override { return stack_.variables(); }
  const std::vector<table_spec>& tables() const override { return tables_; }
  shape_t input_shape() const override { return {keys_.width()}; }
  void skip_training_steps(uint64_t steps, int64_t batch) override {
    stack_.skip_training_steps(steps, batch);
  }

  std::vector<layer_desc> layers() const override {
    layer_desc d;
    d.type = layer_desc::kind::embedding;
    d.name = embedding_.name;
    d.units = embedding_.dim;
    d.combine = embedding_.how;
    d.input = input_shape();
    d.output = {features()};
    std::vector<layer_desc> out{d};
    for (auto& l : stack_.layers())
      out.push_back(l);
    return out;
  }

  std::string describe() const override {
    return "  " + embedding_.name + ": embedding of " + std::to_string(keys_.fields)
           + " field(s) of " + std::to_string(keys_.keys_per_field) + " key(s), table "
           + tables_[0].name + " [" + std::to_string(dim_) + " floats per key], combiner "
           + name_of(embedding_.how) + ", then " + std::to_string(keys_.dense)
           + " dense value(s) -> [" + std::to_string(features()) + "]\n" + stack_.describe();
  }

  void batch_keys(const batch& b, std::vector<int64_t>& ids) const override {
    table_keys_of(keys_, vocabulary_, b, ids);
  }

  batch_stats train_step(const std::vector<tensor>&, const batch&, std::vector<tensor>&) override {
    throw troupe_error("custom looks up an embedding table: call train_step_rows");
  }
  batch_stats evaluate(const std::vector<tensor>&, const batch&) override {
    throw troupe_error("custom looks up an embedding table: call predict_rows");
  }

  batch_stats train_step_rows(const std::vector<tensor>& params, const batch& b, batch_rows& rows,
                              std::vector<tensor>& grads) override {
    const tensor& outputs = forward(params, b, rows, true);
    auto loss = task_ == objective::regression
                  ? mean_squared_error(outputs, b.targets, &output_grad_)
                  : softmax_cross_entropy(outputs, b.labels, &output_grad_);
    grads.resize(params.size());
    stack_.backward(params.data(), output_grad_, grads.data(), &input_grad_);
    // The fields' part of dL/d(input), bag by bag, back to the rows.
    rows.grads.resize(rows.keys.size() * dim_);
    combine_rows_backward(embedding_.how, bags_, rows.keys.inverse(), input_grad_.data(), dim_,
                          rows.keys.size(), rows.grads.data(), input_layout());
    return {loss.loss, loss.correct, b.size()};
  }

  void predict_rows(const std::vector<tensor>& params, const batch& b, const batch_rows& rows,
                    tensor& outputs) override {
    const tensor& y = forward(params, b, rows, false);
    auto n = static_cast<int64_t>(b.size());
    outputs = tensor({n, 1});
    for (int64_t e = 0; e < n; ++e)
      outputs.data()[e] = task_ == objective::regression ? y.data()[e]
                                                         : y.data()[2 * e + 1] - y.data()[2 * e];
  }

private:
  int64_t features() const { return keys_.fields * embedding_.dim + keys_.dense; }
  // An example's fields side by side in a row of the input.
  combined_layout input_layout() const {
    return {static_cast<size_t>(keys_.fields), static_cast<size_t>(features())};
  }

  void check(const std::vector<tensor>& params, const batch& b, const batch_rows& rows) const {
    stack_.check_params(params.data(), params.size());
    if (b.images.rank() != 2 || b.images.dim(1) != keys_.width())
      throw shape_error("custom: examples of " + to_string(b.images.shape()) + ", expected [batch, "
                        + std::to_string(keys_.width()) + "]");
    if (rows.values.size() != rows.keys.size() * dim_)
      throw troupe_error("custom: " + std::to_string(rows.values.size()) + " row values for "
                         + std::to_string(rows.keys.size()) + " keys of " + std::to_string(dim_));
  }

  // The stack's outputs; keeps the bags and the stack's input for backward.
  const tensor& forward(const std::vector<tensor>& params, const batch& b, const batch_rows& rows,
                        bool training) {
    check(params, b, rows);
    auto n = b.size();
    auto fields = static_cast<size_t>(keys_.fields);
    // Bag e·F + f holds example e's keys of field f; keys come in that order.
    bags_.offsets.assign(n * fields + 1, 0);
    bags_.weights.clear();
    for_each_key(keys_, b, [&](size_t e, int64_t, float weight, uint32_t field) {
      ++bags_.offsets[e * fields + field + 1];
      bags_.weights.push_back(weight);
    });
    if (bags_.weights.size() != rows.keys.inverse().size())
      throw troupe_error("custom: the rows were looked up for another batch");
    for (size_t i = 1; i < bags_.offsets.size(); ++i)
      bags_.offsets[i] += bags_.offsets[i - 1];
    if (input_.shape() != shape_t{static_cast<int64_t>(n), features()})
      input_ = tensor({static_cast<int64_t>(n), features()});
    // The fields' vectors straight into the input, then the dense values.
    combine_rows(embedding_.how, bags_, rows.keys.inverse(), rows.values.data(), dim_,
                 input_.data(), input_layout());
    auto width = static_cast<size_t>(features());
    auto example_width = static_cast<size_t>(keys_.width());
    for (size_t e = 0; e < n; ++e)
      std::copy_n(b.images.data() + e * example_width, keys_.dense,
                  input_.data() + e * width + fields * dim_);
    return stack_.forward(params.data(), input_, training);
  }

  std::string name_ = "custom";
  embedding_layer_spec embedding_;
  key_layout keys_;
  fixed_vocabulary vocabulary_; // a fixed-size table's ids; empty: keys are the table's keys
  objective task_;
  uint32_t dim_;
  std::vector<table_spec> tables_;
  layer_stack stack_;
  // Scratch, reused from batch to batch.
  bag_layout bags_;
  tensor input_, output_grad_, input_grad_;
};

} // namespace

std::unique_ptr<model> make_embedding_network(const model_options& options) {
  check_table_options("custom", options);
  auto embedding = parse_embedding_layer(options.layers);
  if (options.layers.size() < 2)
    throw troupe_error("model.layers: the embedding layer needs the layers that follow it, "
                       "ending in a dense layer, e.g. \"dense units=2\"");
  try {
    return std::make_unique<embedding_network>(options, std::move(embedding));
  } catch (const shape_error& e) {
    throw troupe_error(std::string("model.layers: ") + e.what());
  }
}

} // namespace troupe
