#include "tensor/nn/sparse_model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <Eigen/Core>

#include "tensor/nn/batch_keys.hpp"

namespace troupe {

namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_map = Eigen::Map<matrix>;
using const_matrix_map = Eigen::Map<const matrix>;

// One key occurrence of an example: its distinct row, weight and field.
struct occurrence {
  uint32_t row;
  float weight;
  uint32_t field;
};

class sparse_model final : public model {
public:
  sparse_model(model_kind kind, const model_options& options)
    : kind_(kind), name_(name_of(kind)), keys_(options.keys),
      vocabulary_(options.vocabulary, options.ids), task_(options.task),
      factors_(kind == model_kind::lr ? 0 : options.embedding_dim) {
    tables_.push_back({"embedding", static_cast<uint32_t>(1 + factors_)});
    variables_.push_back({"bias", {1}, {}});
    if (keys_.dense > 0)
      variables_.push_back({"dense/weights", {keys_.dense}, {}});
    if (kind_ == model_kind::deepfm) {
      int64_t in = keys_.fields * factors_ + keys_.dense;
      for (size_t l = 0; l <= options.deep_layers.size(); ++l) {
        int64_t out = l < options.deep_layers.size() ? options.deep_layers[l] : 1;
        auto prefix = "deep/"
                      + (l < options.deep_layers.size() ? "layer" + std::to_string(l)
                                                        : std::string("output"));
        first_deep_ = first_deep_ ? first_deep_ : variables_.size();
        variables_.push_back({prefix + "/weights", {in, out}, {initializer::kind::glorot_uniform}});
        variables_.push_back({prefix + "/bias", {out}, {}});
        widths_.push_back(out);
        in = out;
      }
    }
  }

  const std::string& name() const override { return name_; }
  const std::vector<variable_spec>& variables() const override { return variables_; }
  const std::vector<table_spec>& tables() const override { return tables_; }
  shape_t input_shape() const override { return {keys_.width()}; }
  void skip_training_steps(uint64_t, int64_t) override {}

  std::vector<layer_desc> layers() const override { return {}; }

  std::string describe() const override {
    std::ostringstream out;
    out << name_ << ": " << keys_.fields << " field(s) of " << keys_.keys_per_field << " key(s), "
        << keys_.dense << " dense value(s); table " << tables_[0].name << " [" << tables_[0].dim
        << " floats per key]\n";
    for (auto& v : variables_)
      out << "  " << v.name << " " << to_string(v.shape) << "\n";
    return out.str();
  }

  void batch_keys(const batch& b, std::vector<int64_t>& ids) const override {
    table_keys_of(keys_, vocabulary_, b, ids);
  }

  batch_stats train_step(const std::vector<tensor>&, const batch&, std::vector<tensor>&) override {
    throw troupe_error(name_ + " looks up an embedding table: call train_step_rows");
  }
  batch_stats evaluate(const std::vector<tensor>&, const batch&) override {
    throw troupe_error(name_ + " looks up an embedding table: call predict_rows");
  }

  void predict_rows(const std::vector<tensor>& params, const batch& b, const batch_rows& rows,
                    tensor& outputs) override {
    forward(params, b, rows);
    outputs = tensor({static_cast<int64_t>(b.size()), 1});
    std::copy(y_.begin(), y_.end(), outputs.data());
  }

  batch_stats train_step_rows(const std::vector<tensor>& params, const batch& b, batch_rows& rows,
                              std::vector<tensor>& grads) override {
    forward(params, b, rows);
    auto n = b.size();
    batch_stats stats;
    stats.examples = n;
    g_.assign(n, 0.0f);
    double loss = 0;
    for (size_t e = 0; e < n; ++e) {
      float y = y_[e];
      if (task_ == objective::regression) {
        float d = y - b.targets[e];
        loss += double{d} * d;
        g_[e] = 2.0f * d / static_cast<float>(n);
      } else {
        float t = b.labels[e] == 1 ? 1.0f : 0.0f;
        // log(1 + e^y) - t y, stably
        loss += std::max(y, 0.0f) - y * t + std::log1p(std::exp(-std::fabs(y)));
        g_[e] = (1.0f / (1.0f + std::exp(-y)) - t) / static_cast<float>(n);
        stats.correct += (y > 0) == (t > 0.5f);
      }
    }
    stats.loss = n ? loss / static_cast<double>(n) : 0.0;
    backward(params, b, rows, grads);
    return stats;
  }

private:
  void check(const std::vector<tensor>& params, const batch& b, const batch_rows& rows) const {
    if (params.size() != variables_.size())
      throw troupe_error(name_ + ": " + std::to_string(params.size()) + " parameters, expected "
                         + std::to_string(variables_.size()));
    if (b.images.rank() != 2 || b.images.dim(1) != keys_.width())
      throw shape_error(name_ + ": examples of " + to_string(b.images.shape())
                        + ", expected [batch, " + std::to_string(keys_.width()) + "]");
    if (rows.values.size() != rows.keys.size() * tables_[0].dim)
      throw troupe_error(name_ + ": " + std::to_string(rows.values.size()) + " row values for "
                         + std::to_string(rows.keys.size()) + " keys of "
                         + std::to_string(tables_[0].dim));
  }

  // y_ per example; keeps what backward needs (the occurrences, the factor
  // sums, the MLP's activations).
  void forward(const std::vector<tensor>& params, const batch& b, const batch_rows& rows) {
    check(params, b, rows);
    auto n = b.size();
    auto dim = tables_[0].dim;
    auto d = static_cast<size_t>(factors_);
    occ_.clear();
    first_.assign(n + 1, 0);
    auto& inverse = rows.keys.inverse();
    size_t o = 0;
    for_each_key(keys_, b, [&](size_t e, int64_t, float weight, uint32_t field) {
      if (o >= inverse.size())
        throw troupe_error(name_ + ": the rows were looked up for another batch");
      occ_.push_back({inverse[o++], weight, field});
      first_[e + 1] = occ_.size();
    });
    if (o != inverse.size())
      throw troupe_error(name_ + ": the rows were looked up for another batch");
    for (size_t e = 1; e <= n; ++e)
      first_[e] = std::max(first_[e], first_[e - 1]);
    y_.assign(n, params[0].data()[0]);
    sums_.assign(n * d, 0.0f);
    const float* values = rows.values.data();
    auto width = static_cast<size_t>(keys_.width());
    for (size_t e = 0; e < n; ++e) {
      const float* x = b.images.data() + e * width;
      float y = 0;
      if (keys_.dense > 0) {
        const float* u = params[1].data();
        for (int64_t j = 0; j < keys_.dense; ++j)
          y += u[j] * x[j];
      }
      float* s = sums_.data() + e * d;
      float squares = 0;
      for (size_t k = first_[e]; k < first_[e + 1]; ++k) {
        const float* row = values + size_t{occ_[k].row} * dim;
        float a = occ_[k].weight;
        y += a * row[0];
        for (size_t f = 0; f < d; ++f) {
          s[f] += a * row[1 + f];
          squares += a * a * row[1 + f] * row[1 + f];
        }
      }
      if (d > 0) {
        float total = 0;
        for (size_t f = 0; f < d; ++f)
          total += s[f] * s[f];
        y += 0.5f * (total - squares);
      }
      y_[e] += y;
    }
    if (kind_ == model_kind::deepfm)
      deep_forward(params, b, values);
  }

  void deep_forward(const std::vector<tensor>& params, const batch& b, const float* values) {
    auto n = static_cast<Eigen::Index>(b.size());
    auto d = static_cast<size_t>(factors_);
    auto dim = tables_[0].dim;
    auto in = keys_.fields * factors_ + keys_.dense;
    activations_.resize(widths_.size() + 1);
    activations_[0].setZero(n, in);
    auto width = static_cast<size_t>(keys_.width());
    for (Eigen::Index e = 0; e < n; ++e) {
      float* h = activations_[0].row(e).data();
      for (size_t k = first_[e]; k < first_[e + 1]; ++k) {
        const float* row = values + size_t{occ_[k].row} * dim;
        float* field = h + occ_[k].field * d;
        for (size_t f = 0; f < d; ++f)
          field[f] += occ_[k].weight * row[1 + f];
      }
      std::copy_n(b.images.data() + e * width, keys_.dense, h + keys_.fields * factors_);
    }
    for (size_t l = 0; l < widths_.size(); ++l) {
      auto& W = params[first_deep_ + 2 * l];
      auto& bias = params[first_deep_ + 2 * l + 1];
      const_matrix_map w(W.data(), W.dim(0), W.dim(1));
      Eigen::Map<const Eigen::RowVectorXf> c(bias.data(), bias.size());
      matrix z = activations_[l] * w;
      z.rowwise() += c;
      if (l + 1 < widths_.size())
        z = z.cwiseMax(0.0f);
      activations_[l + 1] = std::move(z);
    }
    for (Eigen::Index e = 0; e < n; ++e)
      y_[static_cast<size_t>(e)] += activations_.back()(e, 0);
  }

  void backward(const std::vector<tensor>& params, const batch& b, batch_rows& rows,
                std::vector<tensor>& grads) {
    auto n = b.size();
    auto dim = tables_[0].dim;
    auto d = static_cast<size_t>(factors_);
    grads.resize(variables_.size());
    for (size_t v = 0; v < variables_.size(); ++v) {
      if (grads[v].shape() != variables_[v].shape)
        grads[v] = tensor(variables_[v].shape);
      std::fill(grads[v].data(), grads[v].data() + grads[v].size(), 0.0f);
    }
    rows.grads.assign(rows.values.size(), 0.0f);
    const float* values = rows.values.data();
    float* row_grads = rows.grads.data();
    auto width = static_cast<size_t>(keys_.width());
    for (size_t e = 0; e < n; ++e) {
      float g = g_[e];
      grads[0].data()[0] += g;
      if (keys_.dense > 0) {
        const float* x = b.images.data() + e * width;
        float* du = grads[1].data();
        for (int64_t j = 0; j < keys_.dense; ++j)
          du[j] += g * x[j];
      }
      const float* s = sums_.data() + e * d;
      for (size_t k = first_[e]; k < first_[e + 1]; ++k) {
        const float* row = values + size_t{occ_[k].row} * dim;
        float* dr = row_grads + size_t{occ_[k].row} * dim;
        float a = occ_[k].weight;
        dr[0] += g * a;
        for (size_t f = 0; f < d; ++f)
          dr[1 + f] += g * a * (s[f] - a * row[1 + f]);
      }
    }
    if (kind_ == model_kind::deepfm)
      deep_backward(params, grads, values, row_grads);
  }

  void deep_backward(const std::vector<tensor>& params, std::vector<tensor>& grads,
                     const float* values, float* row_grads) {
    auto n = static_cast<Eigen::Index>(g_.size());
    matrix delta = Eigen::Map<const matrix>(g_.data(), n, 1);
    for (size_t l = widths_.size(); l-- > 0;) {
      auto& W = params[first_deep_ + 2 * l];
      matrix_map dw(grads[first_deep_ + 2 * l].data(), W.dim(0), W.dim(1));
      Eigen::Map<Eigen::RowVectorXf> db(grads[first_deep_ + 2 * l + 1].data(), W.dim(1));
      dw.noalias() += activations_[l].transpose() * delta;
      db += delta.colwise().sum();
      matrix back = delta * const_matrix_map(W.data(), W.dim(0), W.dim(1)).transpose();
      if (l > 0)
        back = back.cwiseProduct((activations_[l].array() > 0.0f).cast<float>().matrix());
      delta = std::move(back);
    }
    // delta: d loss / d h0; the field sums' part goes back to their rows.
    auto d = static_cast<size_t>(factors_);
    auto dim = tables_[0].dim;
    (void)values;
    for (Eigen::Index e = 0; e < n; ++e) {
      const float* dh = delta.row(e).data();
      for (size_t k = first_[static_cast<size_t>(e)]; k < first_[static_cast<size_t>(e) + 1]; ++k) {
        float* dr = row_grads + size_t{occ_[k].row} * dim;
        const float* df = dh + occ_[k].field * d;
        for (size_t f = 0; f < d; ++f)
          dr[1 + f] += occ_[k].weight * df[f];
      }
    }
  }

  model_kind kind_;
  std::string name_;
  key_layout keys_;
  fixed_vocabulary vocabulary_; // a fixed-size table's ids; empty: keys are the table's keys
  objective task_;
  int64_t factors_;
  std::vector<table_spec> tables_;
  std::vector<variable_spec> variables_;
  size_t first_deep_ = 0;
  std::vector<int64_t> widths_;
  // Scratch, reused from batch to batch.
  std::vector<occurrence> occ_;
  std::vector<size_t> first_; // example e's occurrences: occ_[first_[e] .. first_[e + 1])
  std::vector<float> y_, g_, sums_;
  std::vector<matrix> activations_;
};

} // namespace

void check_table_options(const std::string& model, const model_options& options) {
  auto& keys = options.keys;
  if (!keys.sparse())
    throw troupe_error("model " + model
                       + " needs categorical data: data.categorical-columns (CSV), or "
                         "data.format = criteo or libsvm");
  if (options.task == objective::classification && options.classes != 2)
    throw troupe_error("model " + model + " classifies two classes (a click or not), not "
                       + std::to_string(options.classes));
  if (!options.vocabulary.empty() && static_cast<int64_t>(options.vocabulary.size()) != keys.fields)
    throw troupe_error("model " + model + ": embedding.vocabulary lists "
                       + std::to_string(options.vocabulary.size())
                       + " field size(s), but the data has " + std::to_string(keys.fields)
                       + " categorical field(s)");
}

std::unique_ptr<model> make_sparse_model(model_kind kind, const model_options& options) {
  auto name = std::string(name_of(kind));
  if (!uses_embeddings(kind))
    throw troupe_error("model " + name + " looks up no embedding table");
  check_table_options(name, options);
  auto& keys = options.keys;
  if (kind != model_kind::lr && (options.embedding_dim < 1 || options.embedding_dim > 1024))
    throw troupe_error("model " + name + ": embedding.dim = "
                       + std::to_string(options.embedding_dim) + " is outside 1..1024");
  if (kind == model_kind::mf && keys.fields != 2)
    throw troupe_error("model mf factors two fields (user and item), not "
                       + std::to_string(keys.fields)
                       + "; list two data.categorical-columns, or use fm");
  if (kind == model_kind::deepfm)
    for (auto w : options.deep_layers)
      if (w < 1 || w > 65536)
        throw troupe_error("model deepfm: embedding.deep-layers holds " + std::to_string(w)
                           + ", outside 1..65536");
  return std::make_unique<sparse_model>(kind, options);
}

} // namespace troupe
