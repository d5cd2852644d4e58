// troupe-eval MODEL DATA: the loss and accuracy (RMSE for regression) of an
// exported model or a checkpoint on a labelled data file, as a text line and
// a JSON line. Labels are mapped as in training; one without a class is an
// error naming its row.
#include <cstdio>

#include "apps/model_tools.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/export/model_score.hpp"
#include "tensor/nn/metric.hpp"

using namespace troupe;

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
      model_scorer scores(model);
      example_source source(split, 0);
      tools::for_each_batch(source, num_elements(model.card.input),
                            model.card.task == objective::regression,
                            [&](const batch& b, int64_t) { scores.add(b); });
      auto examples = scores.examples();
      if (examples == 0)
        throw data_error(cl.positional[1] + ": holds no examples");
      double loss = scores.loss();
      auto metric = metric_of(model.card.task, loss, scores.correct(), examples);
      std::fprintf(stderr, "troupe-eval: %llu examples, loss %.4f, %s %.4f (model at step %lld)\n",
                   static_cast<unsigned long long>(examples), loss, metric.name, metric.value,
                   static_cast<long long>(model.card.step));
      json_writer line;
      line.begin_object().key("event").string("eval").key("examples").integer(examples);
      line.key("loss").number(loss, "%.4f").key(metric.name).number(metric.value, "%.4f");
      if (scores.binary()) {
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
