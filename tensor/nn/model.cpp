#include "tensor/nn/model.hpp"
#include "tensor/nn/embedding_network.hpp"
#include "tensor/nn/sparse_model.hpp"
#include "tensor/nn/synthetic_model.hpp"

#include <cmath>
#include <random>

#include "tensor/core/error.hpp"
#include "tensor/core/flush_denormals.hpp"
#include "tensor/nn/layer_spec.hpp"
#include "tensor/nn/layer_stack.hpp"
#include "tensor/nn/layers.hpp"
#include "tensor/nn/loss.hpp"

namespace troupe {

batch_stats model::train_step_staged(const batch&) {
  throw troupe_error(name() + " has no staging buffers; call train_step with tensors");
}

void model::predict(const std::vector<tensor>&, const tensor&, tensor&) {
  throw troupe_error(name() + " cannot predict here; load the model on the CPU");
}

const std::vector<table_spec>& model::tables() const {
  static const std::vector<table_spec> none;
  return none;
}

void model::batch_keys(const batch&, std::vector<int64_t>& ids) const {
  ids.clear();
}

batch_stats model::train_step_rows(const std::vector<tensor>& params, const batch& b, batch_rows&,
                                   std::vector<tensor>& grads) {
  return train_step(params, b, grads);
}

batch_stats model::train_step_tables(const std::vector<tensor>& params, const batch& b,
                                     const std::vector<batch_rows*>& rows,
                                     std::vector<tensor>& grads) {
  if (rows.size() != 1)
    throw troupe_error("model " + name() + " looks up one table, not "
                       + std::to_string(rows.size()));
  return train_step_rows(params, b, *rows[0], grads);
}

void model::next_batch_keys(const std::vector<batch_rows*>&) {
  throw troupe_error("model " + name() + " reads its batches from the worker's data");
}

void model::predict_rows(const std::vector<tensor>& params, const batch& b, const batch_rows&,
                         tensor& outputs) {
  predict(params, b.images, outputs);
}

namespace {

// FNV-1a: a stable name hash, so initial values never depend on std::hash.
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class sequential_model final : public model {
public:
  sequential_model(std::string name, shape_t input, int64_t classes,
                   std::vector<std::unique_ptr<layer>> layers, objective task)
    : name_(std::move(name)), stack_(name_, std::move(input), std::move(layers)), task_(task) {
    auto& shape = stack_.output_shape();
    auto& last = stack_.last();
    if (last.variables().empty() || shape != shape_t{classes})
      throw shape_error(name_ + ": the last layer ('" + last.name()
                        + "') must be a dense layer "
                          "with "
                        + std::to_string(classes)
                        + (task == objective::regression ? " unit (the predicted target); it "
                                                         : " units (one logit per class); it ")
                        + "outputs " + to_string(shape));
  }

  const std::string& name() const override { return name_; }
  const std::vector<variable_spec>& variables() const override { return stack_.variables(); }
  std::string describe() const override { return stack_.describe(); }
  std::vector<layer_desc> layers() const override { return stack_.layers(); }
  shape_t input_shape() const override { return stack_.input_shape(); }

  void skip_training_steps(uint64_t steps, int64_t batch) override {
    stack_.skip_training_steps(steps, batch);
  }

  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override {
    stack_.check_params(params.data(), params.size());
    const tensor& logits = stack_.forward(params.data(), b.images, true);
    auto loss = task_ == objective::regression
                  ? mean_squared_error(logits, b.targets, &grad_logits_)
                  : softmax_cross_entropy(logits, b.labels, &grad_logits_);
    grads.resize(params.size());
    // The first layer's input is the data: no gradient needed there.
    stack_.backward(params.data(), grad_logits_, grads.data(), nullptr);
    return {loss.loss, loss.correct, b.size()};
  }

  void predict(const std::vector<tensor>& params, const tensor& inputs, tensor& outputs) override {
    stack_.check_params(params.data(), params.size());
    outputs = stack_.forward(params.data(), inputs, false);
  }

  batch_stats evaluate(const std::vector<tensor>& params, const batch& b) override {
    stack_.check_params(params.data(), params.size());
    const tensor& logits = stack_.forward(params.data(), b.images, false);
    auto loss = task_ == objective::regression ? mean_squared_error(logits, b.targets)
                                               : softmax_cross_entropy(logits, b.labels);
    return {loss.loss, loss.correct, b.size()};
  }

private:
  std::string name_;
  layer_stack stack_;
  objective task_;
  tensor grad_logits_;
};

initializer zeros() {
  return {initializer::kind::zeros, 0.0f};
}

initializer truncated(float stddev) {
  return {initializer::kind::truncated_normal, stddev};
}

initializer constant(float value) {
  return {initializer::kind::constant, value};
}

} // namespace

tensor initial_value(const variable_spec& spec, uint64_t seed) {
  tensor out(spec.shape);
  std::mt19937_64 rng(seed ^ stable_hash(spec.name));
  switch (spec.init.type) {
    case initializer::kind::zeros:
      break;
    case initializer::kind::constant:
      out.fill(spec.init.value);
      break;
    case initializer::kind::random_normal: {
      std::normal_distribution<float> dist(0.0f, spec.init.value);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = dist(rng);
      break;
    }
    case initializer::kind::truncated_normal: {
      // TF: redraw values more than two standard deviations from the mean.
      std::normal_distribution<float> dist(0.0f, spec.init.value);
      for (size_t i = 0; i < out.size(); ++i) {
        float v;
        do
          v = dist(rng);
        while (std::fabs(v) > 2.0f * spec.init.value);
        out[i] = v;
      }
      break;
    }
    case initializer::kind::glorot_uniform: {
      if (spec.shape.size() < 2)
        throw shape_error("glorot_uniform needs rank >= 2: " + spec.name);
      int64_t receptive = 1;
      for (size_t i = 0; i + 2 < spec.shape.size(); ++i)
        receptive *= spec.shape[i];
      double fan_in = static_cast<double>(spec.shape[spec.shape.size() - 2] * receptive);
      double fan_out = static_cast<double>(spec.shape.back() * receptive);
      auto limit = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
      std::uniform_real_distribution<float> dist(-limit, limit);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = dist(rng);
      break;
    }
  }
  return out;
}

std::unique_ptr<model> make_sequential(std::string name, shape_t input, int64_t classes,
                                       std::vector<std::unique_ptr<layer>> layers, objective task) {
  return std::make_unique<sequential_model>(std::move(name), std::move(input), classes,
                                            std::move(layers), task);
}

std::unique_ptr<model> make_softmax_model(int64_t features, int64_t classes, objective task) {
  std::vector<std::unique_ptr<layer>> layers;
  layers.push_back(make_dense("softmax", classes, zeros(), zeros()));
  return make_sequential("softmax", {features}, classes, std::move(layers), task);
}

namespace {

// TF's mnist.py: two ReLU hidden layers, weights ~ truncated normal with
// stddev 1/sqrt(fan_in), zero biases.
std::unique_ptr<model> make_mlp(int64_t features, int64_t classes, objective task) {
  std::vector<std::unique_ptr<layer>> layers;
  float stddev = 1.0f / std::sqrt(static_cast<float>(features));
  layers.push_back(make_dense("hidden1", 256, truncated(stddev), zeros()));
  layers.push_back(make_relu("hidden1/relu"));
  layers.push_back(make_dense("hidden2", 256, truncated(1.0f / 16.0f), zeros()));
  layers.push_back(make_relu("hidden2/relu"));
  layers.push_back(make_dense("softmax_linear", classes, truncated(1.0f / 16.0f), zeros()));
  return make_sequential("mlp", {features}, classes, std::move(layers), task);
}

// The seeds' "deepnn": weights ~ truncated normal(0.1), biases 0.1.
std::unique_ptr<model> make_cnn(const shape_t& input, int64_t classes, objective task,
                                uint64_t seed) {
  std::vector<std::unique_ptr<layer>> layers;
  layers.push_back(
    make_conv2d("conv1", 32, 5, 5, 1, padding::same, truncated(0.1f), constant(0.1f)));
  layers.push_back(make_relu("conv1/relu"));
  layers.push_back(make_max_pool("pool1", 2, 2, padding::same));
  layers.push_back(
    make_conv2d("conv2", 64, 5, 5, 1, padding::same, truncated(0.1f), constant(0.1f)));
  layers.push_back(make_relu("conv2/relu"));
  layers.push_back(make_max_pool("pool2", 2, 2, padding::same));
  layers.push_back(make_flatten("flatten"));
  layers.push_back(make_dense("fc1", 1024, truncated(0.1f), constant(0.1f)));
  layers.push_back(make_relu("fc1/relu"));
  layers.push_back(make_dropout("dropout", 0.5f, seed));
  layers.push_back(make_dense("fc2", classes, truncated(0.1f), constant(0.1f)));
  return make_sequential("cnn", input, classes, std::move(layers), task);
}

// VGG-11/16/19: 3x3 SAME convolutions in five blocks with max-pooling after
// each (28 -> 14 -> 7 -> 4 -> 2 -> 1 for 28x28 inputs), two hidden fully
// connected layers; every width multiplied by `width` (VGG's 64..512, 4096).
std::unique_ptr<model> make_vgg(const std::string& name, const shape_t& input, int64_t classes,
                                objective task, const std::vector<int>& block_convs, double width,
                                uint64_t seed) {
  auto scaled = [&](int channels) {
    return std::max<int64_t>(1, static_cast<int64_t>(channels * width + 0.5));
  };
  const int block_channels[] = {64, 128, 256, 512, 512};
  std::vector<std::unique_ptr<layer>> layers;
  for (size_t blk = 0; blk < block_convs.size(); ++blk) {
    for (int c = 0; c < block_convs[blk]; ++c) {
      auto id = "conv" + std::to_string(blk + 1) + "_" + std::to_string(c + 1);
      layers.push_back(make_conv2d(id, scaled(block_channels[blk]), 3, 3, 1, padding::same,
                                   {initializer::kind::glorot_uniform, 0}, zeros()));
      layers.push_back(make_relu(id + "/relu"));
    }
    layers.push_back(make_max_pool("pool" + std::to_string(blk + 1), 2, 2, padding::same));
  }
  layers.push_back(make_flatten("flatten"));
  for (int fc = 1; fc <= 2; ++fc) {
    auto id = "fc" + std::to_string(fc);
    layers.push_back(make_dense(id, scaled(4096), {initializer::kind::glorot_uniform, 0}, zeros()));
    layers.push_back(make_relu(id + "/relu"));
    layers.push_back(make_dropout(id + "/dropout", 0.5f, seed + fc));
  }
  layers.push_back(make_dense("fc3", classes, {initializer::kind::glorot_uniform, 0}, zeros()));
  return make_sequential(name, input, classes, std::move(layers), task);
}

// The built-in model of `kind` (null for custom and for a value outside the
// table); a shape_error when its layers do not fit the input.
std::unique_ptr<model> make_built_in(model_kind kind, const model_options& options) {
  auto& input = options.input;
  auto classes = options.classes;
  auto task = options.task;
  std::string name = name_of(kind);
  switch (kind) {
    case model_kind::softmax:
      return make_softmax_model(num_elements(input), classes, task);
    case model_kind::mlp:
      return make_mlp(num_elements(input), classes, task);
    case model_kind::cnn:
      return make_cnn(input, classes, task, options.seed);
    case model_kind::vgg11:
      return make_vgg(name, input, classes, task, {1, 1, 2, 2, 2}, options.vgg_width, options.seed);
    case model_kind::vgg16:
      return make_vgg(name, input, classes, task, {2, 2, 3, 3, 3}, options.vgg_width, options.seed);
    case model_kind::vgg19:
      return make_vgg(name, input, classes, task, {2, 2, 4, 4, 4}, options.vgg_width, options.seed);
    case model_kind::custom:
    case model_kind::lr:
    case model_kind::fm:
    case model_kind::mf:
    case model_kind::deepfm:
    case model_kind::synthetic:
    case model_kind::declared:
      break; // make_model builds these, or refuses
  }
  return nullptr;
}

bool convolutional(model_kind kind) {
  return kind == model_kind::cnn || kind == model_kind::vgg11 || kind == model_kind::vgg16
         || kind == model_kind::vgg19;
}

} // namespace

std::unique_ptr<model> make_model(model_kind kind, const model_options& options) {
  if (uses_embeddings(kind))
    return make_sparse_model(kind, options);
  if (uses_embeddings(kind, options.layers))
    return make_embedding_network(options);
  if (kind == model_kind::synthetic)
    return make_synthetic_model(options);
  if (kind == model_kind::declared)
    throw troupe_error("train.model = declared: the model is declared by each worker's program "
                       "(the troupe Python package), not built by troupe-node");
  std::string name = name_of(kind);
  auto& input = options.input;
  auto classes = options.classes;
  auto task = options.task;
  if (task == objective::regression ? classes != 1 : classes < 2)
    throw troupe_error(
      "model " + name + ": "
      + (task == objective::regression ? "regression has one output" : "needs at least 2 classes")
      + ", not " + std::to_string(classes));
  if (convolutional(kind) && input.size() != 3)
    throw troupe_error("model " + name + " takes examples of shape [height, width, channels]; "
                       + "the data's are " + to_string(input)
                       + " (set data.input-shape, e.g. [28, 28, 1])");
  try {
    if (auto built_in = make_built_in(kind, options))
      return built_in;
  } catch (const shape_error& e) {
    throw troupe_error("model " + name + " does not fit examples of shape " + to_string(input)
                       + ": " + e.what());
  }
  if (kind == model_kind::custom) {
    if (options.layers.empty())
      throw troupe_error("model custom: list its layers in model.layers");
    try {
      return make_sequential("custom", options.input, options.classes,
                             parse_layers(options.layers, options.seed), task);
    } catch (const shape_error& e) {
      throw troupe_error(std::string("model.layers: ") + e.what());
    }
  }
  throw troupe_error("unknown model '" + name + "' (known: " + name_list<model_kind>() + ")");
}

bool uses_embeddings(model_kind kind, const std::vector<std::string>& layers) {
  return uses_embeddings(kind) || (kind == model_kind::custom && starts_with_embedding(layers));
}

std::vector<tensor> initial_values(const model& m, uint64_t seed) {
  std::vector<tensor> out;
  for (auto& v : m.variables())
    out.push_back(initial_value(v, seed));
  return out;
}

batch_stats evaluate_dataset(model& m, const std::vector<tensor>& params,
                             const evaluation_set& data, size_t batch_size) {
  batch_stats total;
  batch b;
  double loss_sum = 0;
  flush_denormals arithmetic;
  for (auto examples = data.read(batch_size); examples.next(b);) {
    auto s = m.evaluate(params, b);
    loss_sum += s.loss * static_cast<double>(s.examples);
    total.correct += s.correct;
    total.examples += s.examples;
  }
  total.loss = total.examples > 0 ? loss_sum / static_cast<double>(total.examples) : 0.0;
  return total;
}

} // namespace troupe
