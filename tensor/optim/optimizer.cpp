#include "tensor/optim/optimizer.hpp"

#include <cmath>
#include <utility>

#include "tensor/core/error.hpp"
#include "tensor/core/flush_denormals.hpp"

namespace troupe {

double lr_schedule::at(int64_t step) const {
  switch (type) {
    case kind::constant:
      return base;
    case kind::exponential_decay: {
      double exponent = static_cast<double>(step) / static_cast<double>(decay_steps);
      if (staircase)
        exponent = std::floor(exponent);
      return base * std::pow(decay_rate, exponent);
    }
    case kind::piecewise_constant:
      for (size_t i = 0; i < boundaries.size(); ++i)
        if (step <= boundaries[i])
          return values[i];
      return values.back();
  }
  return base;
}

maybe_failure lr_schedule::check() const {
  auto fail = [](std::string why) { return failure{errc::invalid_setting, std::move(why)}; };
  if (type != kind::piecewise_constant && !(base > 0 && std::isfinite(base)))
    return fail("the learning rate must be a positive number");
  if (type == kind::exponential_decay) {
    if (decay_steps < 1)
      return fail("exponential decay needs decay steps >= 1");
    if (!(decay_rate > 0 && decay_rate <= 1))
      return fail("exponential decay needs a decay rate in (0, 1]");
  }
  if (type == kind::piecewise_constant) {
    if (values.size() != boundaries.size() + 1)
      return fail("piecewise constant needs one more value than boundaries (values hold "
                  + std::to_string(values.size()) + ", boundaries "
                  + std::to_string(boundaries.size()) + ")");
    for (size_t i = 1; i < boundaries.size(); ++i)
      if (boundaries[i] <= boundaries[i - 1])
        return fail("piecewise constant boundaries must increase");
    for (auto v : values)
      if (!(v > 0 && std::isfinite(v)))
        return fail("piecewise constant values must be positive numbers");
  }
  return std::nullopt;
}

maybe_failure optimizer_config::check() const {
  auto fail = [](std::string why) { return failure{errc::invalid_setting, std::move(why)}; };
  if (auto err = learning_rate.check())
    return err;
  switch (kind) {
    case optimizer_kind::sgd:
      break;
    case optimizer_kind::momentum:
      if (!(momentum >= 0 && momentum < 1))
        return fail("momentum must be in [0, 1)");
      break;
    case optimizer_kind::adagrad:
      if (!(initial_accumulator > 0 && std::isfinite(initial_accumulator)))
        return fail("adagrad's initial accumulator must be a positive number");
      break;
    case optimizer_kind::rmsprop:
      if (!(rms_decay >= 0 && rms_decay < 1 && rms_momentum >= 0 && rms_momentum < 1))
        return fail("rmsprop's decay and momentum must be in [0, 1)");
      break;
    case optimizer_kind::adam:
      if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
        return fail("adam's beta1 and beta2 must be in [0, 1)");
      break;
  }
  if (!(epsilon >= 0 && std::isfinite(epsilon)))
    return fail("epsilon must be 0 or a positive number");
  return std::nullopt;
}

void optimizer::apply(const std::string& name, tensor& var, const tensor& grad, int64_t step) {
  if (var.shape() != grad.shape())
    throw shape_error("optimizer: gradient for " + name + " has shape " + to_string(grad.shape())
                      + ", variable " + to_string(var.shape()));
  flush_denormals arithmetic;
  update(name, var, grad, learning_rate_at(step), step);
}

tensor& optimizer::slot(const std::string& name, const char* slot_name, const tensor& like,
                        float init) {
  auto key = name + "/" + slot_name;
  auto i = slots_.find(key);
  if (i == slots_.end())
    i = slots_.emplace(key, tensor(like.shape(), init)).first;
  return i->second;
}

std::map<std::string, const tensor*> optimizer::slots() const {
  std::map<std::string, const tensor*> out;
  for (auto& kv : slots_)
    out.emplace(kv.first, &kv.second);
  return out;
}

namespace {

class sgd final : public optimizer {
  using optimizer::optimizer;
  void update(const std::string&, tensor& var, const tensor& grad, double lr, int64_t) override {
    auto a = static_cast<float>(lr);
    for (size_t i = 0; i < var.size(); ++i)
      var[i] -= a * grad[i];
  }
};

// TF ApplyMomentum: accum = accum * m + g; var -= lr * accum, or with
// Nesterov var -= lr * g + lr * m * accum.
class momentum_opt final : public optimizer {
public:
  momentum_opt(double m, bool nesterov) : m_(static_cast<float>(m)), nesterov_(nesterov) {}
  void update(const std::string& name, tensor& var, const tensor& grad, double lr,
              int64_t) override {
    auto& accum = slot(name, "momentum", var, 0.0f);
    auto a = static_cast<float>(lr);
    for (size_t i = 0; i < var.size(); ++i) {
      accum[i] = accum[i] * m_ + grad[i];
      var[i] -= nesterov_ ? a * grad[i] + a * m_ * accum[i] : a * accum[i];
    }
  }

private:
  float m_;
  bool nesterov_;
};

// TF ApplyAdagrad: accum += g^2; var -= lr * g / sqrt(accum).
class adagrad final : public optimizer {
public:
  explicit adagrad(double init) : init_(static_cast<float>(init)) {}
  void update(const std::string& name, tensor& var, const tensor& grad, double lr,
              int64_t) override {
    auto& accum = slot(name, "Adagrad", var, init_);
    auto a = static_cast<float>(lr);
    for (size_t i = 0; i < var.size(); ++i) {
      accum[i] += grad[i] * grad[i];
      var[i] -= a * grad[i] / std::sqrt(accum[i]);
    }
  }

private:
  float init_;
};

// TF ApplyRMSProp: ms = decay * ms + (1 - decay) g^2;
// mom = momentum * mom + lr * g / sqrt(ms + eps); var -= mom. TF 1.x starts
// ms at 1.
class rmsprop final : public optimizer {
public:
  rmsprop(double decay, double momentum, double eps)
    : decay_(static_cast<float>(decay)), momentum_(static_cast<float>(momentum)),
      eps_(static_cast<float>(eps)) {}
  void update(const std::string& name, tensor& var, const tensor& grad, double lr,
              int64_t) override {
    auto& ms = slot(name, "RMSProp", var, 1.0f);
    auto& mom = slot(name, "Momentum", var, 0.0f);
    auto a = static_cast<float>(lr);
    for (size_t i = 0; i < var.size(); ++i) {
      ms[i] = decay_ * ms[i] + (1.0f - decay_) * grad[i] * grad[i];
      mom[i] = momentum_ * mom[i] + a * grad[i] / std::sqrt(ms[i] + eps_);
      var[i] -= mom[i];
    }
  }

private:
  float decay_, momentum_, eps_;
};

// TF ApplyAdam with t = step + 1:
// lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; var -= lr_t * m / (sqrt(v) + eps).
class adam final : public optimizer {
public:
  adam(double b1, double b2, double eps) : b1_(b1), b2_(b2), eps_(static_cast<float>(eps)) {}
  void update(const std::string& name, tensor& var, const tensor& grad, double lr,
              int64_t step) override {
    auto& m = slot(name, "Adam", var, 0.0f);
    auto& v = slot(name, "Adam_1", var, 0.0f);
    double t = static_cast<double>(step + 1);
    auto lr_t = static_cast<float>(lr * std::sqrt(1.0 - std::pow(b2_, t))
                                   / (1.0 - std::pow(b1_, t)));
    auto b1 = static_cast<float>(b1_), b2 = static_cast<float>(b2_);
    for (size_t i = 0; i < var.size(); ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * grad[i];
      v[i] = b2 * v[i] + (1.0f - b2) * grad[i] * grad[i];
      var[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps_);
    }
  }

private:
  double b1_, b2_;
  float eps_;
};

} // namespace

std::vector<std::string> slot_names(optimizer_kind kind) {
  switch (kind) {
    case optimizer_kind::sgd:
      return {};
    case optimizer_kind::momentum:
      return {"momentum"};
    case optimizer_kind::adagrad:
      return {"Adagrad"};
    case optimizer_kind::rmsprop:
      return {"RMSProp", "Momentum"};
    case optimizer_kind::adam:
      return {"Adam", "Adam_1"};
  }
  return {};
}

std::unique_ptr<optimizer> make_optimizer(const optimizer_config& c) {
  if (auto err = c.check())
    throw troupe_error("optimizer: " + err->message);
  std::unique_ptr<optimizer> out;
  switch (c.kind) {
    case optimizer_kind::sgd:
      out = std::make_unique<sgd>();
      break;
    case optimizer_kind::momentum:
      out = std::make_unique<momentum_opt>(c.momentum, c.nesterov);
      break;
    case optimizer_kind::adagrad:
      out = std::make_unique<adagrad>(c.initial_accumulator);
      break;
    case optimizer_kind::rmsprop:
      out = std::make_unique<rmsprop>(c.rms_decay, c.rms_momentum,
                                      c.epsilon > 0 ? c.epsilon : 1e-10);
      break;
    case optimizer_kind::adam:
      out = std::make_unique<adam>(c.beta1, c.beta2, c.epsilon > 0 ? c.epsilon : 1e-8);
      break;
  }
  out->schedule_ = c.learning_rate;
  return out;
}

namespace {

// buffer(i) -> {data, size} for i < count: one body for tensors and raw buffers.
template <class Buffer>
double sum_of_squares(size_t count, Buffer buffer) {
  double sum = 0;
  for (size_t b = 0; b < count; ++b) {
    auto [data, size] = buffer(b);
    for (size_t i = 0; i < size; ++i)
      sum += double(data[i]) * double(data[i]);
  }
  return sum;
}

template <class Buffer>
double clip_buffers(size_t count, Buffer buffer, double clip, double known_norm) {
  auto norm = known_norm >= 0 ? known_norm : std::sqrt(sum_of_squares(count, buffer));
  if (clip > 0 && norm > clip) {
    auto scale = static_cast<float>(clip / norm);
    for (size_t b = 0; b < count; ++b) {
      auto [data, size] = buffer(b);
      for (size_t i = 0; i < size; ++i)
        data[i] *= scale;
    }
  }
  return norm;
}

} // namespace

double global_norm(const std::vector<tensor>& tensors) {
  return std::sqrt(sum_of_squares(tensors.size(), [&](size_t b) {
    return std::pair<const float*, size_t>(tensors[b].data(), tensors[b].size());
  }));
}

double clip_by_global_norm(std::vector<tensor>& tensors, double clip, double known_norm) {
  return clip_buffers(
    tensors.size(),
    [&](size_t b) { return std::pair<float*, size_t>(tensors[b].data(), tensors[b].size()); }, clip,
    known_norm);
}

double clip_by_global_norm(const std::vector<float*>& buffers, const std::vector<size_t>& sizes,
                           double clip, double known_norm) {
  if (buffers.size() != sizes.size())
    throw troupe_error("clip_by_global_norm: " + std::to_string(buffers.size()) + " buffers but "
                       + std::to_string(sizes.size()) + " sizes");
  return clip_buffers(
    buffers.size(), [&](size_t b) { return std::pair<float*, size_t>(buffers[b], sizes[b]); }, clip,
    known_norm);
}

} // namespace troupe
