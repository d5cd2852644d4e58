// troupe-eval MODEL DATA: the loss and accuracy (RMSE for regression) of an
// exported model or a checkpoint on a labelled data file, as a text line and
// a JSON line. Labels are mapped as in training; one without a class is an
// error naming its row.
#include <cmath>
#include <cstdio>

#include "apps/model_tools.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/nn/metric.hpp"

using namespace troupe;

namespace {

// Example e of a model with an embedding table: its loss (log loss of the
// logit, or squared error), whether it is right, and its score for the AUC.
void score_example(const model_card& card, const batch& b, int64_t e, const tensor& outputs,
                   double& loss_sum, uint64_t& correct, binary_scores& scores) {
  auto i = static_cast<size_t>(e);
  if (card.task == objective::regression) {
    double d = double{outputs.data()[i]} - b.targets[i];
    loss_sum += d * d;
    return;
  }
  float y = outputs.data()[2 * i + 1]; // the logits are (0, y)
  bool positive = b.labels[i] == 1;
  loss_sum += binary_scores::example_loss(y, positive);
  correct += (y > 0) == positive;
  scores.add_logit(y, positive);
}

} // namespace

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-eval MODEL DATA [--labels=FILE] [--label-column=NAME] [--card=MODEL_JSON]\n"
    "                   [--format=idx|csv|npy] [--csv-delimiter=C] [--no-header]\n"
    "  MODEL  an export directory (model.json + model.safetensors) or a checkpoint\n"
    "  DATA   labelled examples: a CSV with the label column, or IDX/.npy with --labels\n";
  const std::vector<std::string> options = {"labels", "label-column",  "card",
                                            "format", "csv-delimiter", "no-header"};
  return tools::run_model_tool(
    "troupe-eval", argc, argv, options, usage, 2,
    [](exported_model& model, const tools::command_line& cl) {
      auto split = tools::input_split(model.card, cl, cl.positional[1], true);
      double loss_sum = 0;
      uint64_t correct = 0, examples = 0;
      bool binary = model.table && model.card.task == objective::classification;
      binary_scores scores;
      tensor outputs;
      example_source source(split, 0);
      tools::for_each_batch(
        source, num_elements(model.card.input), model.card.task == objective::regression,
        [&](const batch& b, int64_t n) {
          if (!model.table) {
            auto stats = model.net->evaluate(model.params, b);
            loss_sum += stats.loss * static_cast<double>(n);
            correct += stats.correct;
          } else {
            predict_batch(model, b, outputs);
            for (int64_t e = 0; e < n; ++e)
              score_example(model.card, b, e, outputs, loss_sum, correct, scores);
          }
          examples += static_cast<uint64_t>(n);
        });
      if (examples == 0)
        throw data_error(cl.positional[1] + ": holds no examples");
      double loss = loss_sum / static_cast<double>(examples);
      auto metric = metric_of(model.card.task, loss, correct, examples);
      std::fprintf(stderr, "troupe-eval: %llu examples, loss %.4f, %s %.4f (model at step %lld)\n",
                   static_cast<unsigned long long>(examples), loss, metric.name, metric.value,
                   static_cast<long long>(model.card.step));
      json_writer line;
      line.begin_object().key("event").string("eval").key("examples").integer(examples);
      line.key("loss").number(loss, "%.4f").key(metric.name).number(metric.value, "%.4f");
      if (binary) {
        line.key("auc")
          .number(scores.auc(), "%.6f")
          .key("logloss")
          .number(scores.logloss(), "%.6f");
        std::fprintf(stderr, "troupe-eval: auc %.6f, logloss %.6f\n", scores.auc(),
                     scores.logloss());
      }
      line.key("step").integer(model.card.step).end_object();
      std::printf("%s\n", line.text().c_str());
      return tools::exit_ok;
    });
}
