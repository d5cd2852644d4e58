#include "tensor/nn/synthetic_model.hpp"

#include <chrono>
#include <sstream>
#include <thread>

namespace troupe {

namespace {

class synthetic_model final : public model {
public:
  explicit synthetic_model(const model_options& o)
    : input_(o.input), step_(std::chrono::duration<double, std::milli>(o.synthetic.step_ms)),
      busy_(o.synthetic.busy) {
    variables_.push_back({"synthetic/weights", {o.synthetic.floats}, {}});
  }

  const std::string& name() const override { return name_; }
  const std::vector<variable_spec>& variables() const override { return variables_; }
  shape_t input_shape() const override { return input_; }
  std::vector<layer_desc> layers() const override { return {}; }
  void skip_training_steps(uint64_t, int64_t) override {}
  std::string describe() const override {
    std::ostringstream out;
    out << "synthetic: a step of " << step_.count() << " ms (" << (busy_ ? "busy" : "sleeping")
        << "), one variable of " << variables_[0].shape[0] << " floats\n";
    return out.str();
  }

  batch_stats train_step(const std::vector<tensor>&, const batch& b,
                         std::vector<tensor>& grads) override {
    spend_step();
    grads.resize(1);
    if (grads[0].shape() != variables_[0].shape)
      grads[0] = tensor(variables_[0].shape);
    grads[0].fill(1e-3f);
    batch_stats stats;
    stats.examples = b.size();
    stats.loss = 1.0;
    return stats;
  }
  batch_stats evaluate(const std::vector<tensor>&, const batch& b) override {
    batch_stats stats;
    stats.examples = b.size();
    stats.loss = 1.0;
    return stats;
  }

private:
  void spend_step() const {
    if (!busy_) {
      std::this_thread::sleep_for(step_);
      return;
    }
    auto until = std::chrono::steady_clock::now() + step_;
    while (std::chrono::steady_clock::now() < until) {
    }
  }

  std::string name_ = "synthetic";
  shape_t input_;
  std::chrono::duration<double, std::milli> step_;
  bool busy_;
  std::vector<variable_spec> variables_;
};

} // namespace

std::unique_ptr<model> make_synthetic_model(const model_options& options) {
  auto& s = options.synthetic;
  if (!(s.step_ms >= 0 && s.step_ms <= 60'000))
    throw troupe_error("model synthetic: model.step-ms must be in [0, 60000]");
  if (s.floats < 1 || s.floats > (int64_t{1} << 28))
    throw troupe_error("model synthetic: model.floats must be in [1, 2^28]");
  return std::make_unique<synthetic_model>(options);
}

} // namespace troupe
