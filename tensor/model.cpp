#include "tensor/model.hpp"

#include <cmath>
#include <random>

#include "tensor/error.hpp"
#include "tensor/ops.hpp"

namespace troupe {

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

class softmax_model : public model {
public:
  softmax_model(int64_t features, int64_t classes) {
    vars_.push_back({"softmax/weights", {features, classes},
                     {initializer::kind::zeros, 0.0f}});
    vars_.push_back({"softmax/biases", {classes}, {initializer::kind::zeros, 0.0f}});
  }

  const std::string& name() const override {
    static const std::string n = "softmax";
    return n;
  }

  const std::vector<variable_spec>& variables() const override {
    return vars_;
  }

  batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                         std::vector<tensor>& grads) override {
    check_params(params);
    forward(params, b);
    grads.resize(2);
    batch_stats out;
    out.loss = ops::softmax_cross_entropy(logits_, b.labels, grad_logits_);
    out.correct = ops::count_correct(logits_, b.labels);
    out.examples = b.size();
    ops::matmul(b.images, grad_logits_, grads[0], true, false);
    ops::sum_rows(grad_logits_, grads[1]);
    return out;
  }

  batch_stats evaluate(const std::vector<tensor>& params, const batch& b) override {
    check_params(params);
    forward(params, b);
    return {ops::softmax_cross_entropy(logits_, b.labels),
            ops::count_correct(logits_, b.labels), b.size()};
  }

private:
  void check_params(const std::vector<tensor>& params) const {
    if (params.size() != vars_.size())
      throw shape_error("softmax: expected " + std::to_string(vars_.size())
                        + " parameters, got " + std::to_string(params.size()));
    for (size_t i = 0; i < vars_.size(); ++i)
      if (params[i].shape() != vars_[i].shape)
        throw shape_error("softmax: " + vars_[i].name + " has shape "
                          + to_string(params[i].shape()) + ", expected "
                          + to_string(vars_[i].shape));
  }

  void forward(const std::vector<tensor>& params, const batch& b) {
    ops::matmul(b.images, params[0], logits_);
    ops::add_bias(logits_, params[1]);
  }

  std::vector<variable_spec> vars_;
  tensor logits_;
  tensor grad_logits_;
};

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

std::unique_ptr<model> make_softmax_model(int64_t features, int64_t classes) {
  return std::make_unique<softmax_model>(features, classes);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"softmax"};
  return names;
}

std::unique_ptr<model> make_model(const std::string& name) {
  if (name == "softmax")
    return make_softmax_model();
  std::string known;
  for (auto& n : model_names())
    known += (known.empty() ? "" : ", ") + n;
  throw troupe_error("unknown model '" + name + "' (known: " + known + ")");
}

batch_stats evaluate_dataset(model& m, const std::vector<tensor>& params,
                             const dataset& data, size_t batch_size) {
  batch_stats total;
  batch b;
  double loss_sum = 0;
  for (size_t first = 0; first < data.size(); first += batch_size) {
    slice_batch(data, first, batch_size, b);
    auto s = m.evaluate(params, b);
    loss_sum += s.loss * static_cast<double>(s.examples);
    total.correct += s.correct;
    total.examples += s.examples;
  }
  total.loss = total.examples > 0 ? loss_sum / static_cast<double>(total.examples) : 0.0;
  return total;
}

} // namespace troupe
