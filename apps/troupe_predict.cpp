// troupe-predict MODEL INPUT: one prediction per example of INPUT (CSV, IDX
// or .npy, as training reads them), as CSV or JSON lines: the class, its
// name where labels were names, and every class's probability; or the value
// for regression. The model's saved normalisation and label names apply.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "apps/model_tools.hpp"
#include "tensor/core/json_writer.hpp"

using namespace troupe;

namespace {

// Softmax of one row of logits, in double for stability.
void probabilities(const float* logits, int64_t classes, std::vector<double>& out) {
  out.resize(static_cast<size_t>(classes));
  double largest = *std::max_element(logits, logits + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    sum += out[static_cast<size_t>(c)] = std::exp(static_cast<double>(logits[c]) - largest);
  for (auto& p : out)
    p /= sum;
}

// One row per example: CSV (row,class[,label],p_<class>...; row,value for
// regression) or JSON lines.
class prediction_writer {
public:
  prediction_writer(std::ostream& out, const model_card& card, bool jsonl)
    : out_(out), card_(card), jsonl_(jsonl), regression_(card.task == objective::regression) {}

  void header() {
    if (jsonl_)
      return;
    out_ << (regression_ ? "row,value" : "row,class");
    if (!regression_ && !card_.label_names.empty())
      out_ << ",label";
    for (int64_t c = 0; !regression_ && c < card_.classes; ++c)
      out_ << ",p_"
           << (card_.label_names.empty() ? std::to_string(c)
                                         : card_.label_names[static_cast<size_t>(c)]);
    out_ << "\n";
  }

  void write(uint64_t row, const float* outputs) {
    if (regression_)
      write_value(row, outputs[0]);
    else
      write_classes(row, outputs);
  }

private:
  void write_value(uint64_t row, float value) {
    auto number = format_number(static_cast<double>(value));
    out_ << (jsonl_ ? "{\"row\":" + std::to_string(row) + ",\"value\":" + number + "}"
                    : std::to_string(row) + "," + number)
         << "\n";
  }

  void write_classes(uint64_t row, const float* logits) {
    probabilities(logits, card_.classes, p_);
    auto best = static_cast<size_t>(std::max_element(p_.begin(), p_.end()) - p_.begin());
    std::string line = jsonl_
                         ? "{\"row\":" + std::to_string(row) + ",\"class\":" + std::to_string(best)
                         : std::to_string(row) + "," + std::to_string(best);
    if (!card_.label_names.empty())
      line += jsonl_ ? ",\"label\":" + json_string(card_.label_names[best])
                     : "," + card_.label_names[best];
    line += jsonl_ ? ",\"probabilities\":[" : "";
    for (size_t c = 0; c < p_.size(); ++c)
      line += (jsonl_ ? (c ? "," : "") : ",") + format_number(p_[c]);
    out_ << line << (jsonl_ ? "]}" : "") << "\n";
  }

  static std::string format_number(double value) {
    char number[32];
    std::snprintf(number, sizeof number, "%.9g", value);
    return number;
  }

  std::ostream& out_;
  const model_card& card_;
  bool jsonl_;
  bool regression_;
  std::vector<double> p_;
};

} // namespace

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-predict MODEL INPUT [--output=FILE] [--jsonl] [--labels=FILE]\n"
    "                      [--format=idx|csv|npy|criteo|libsvm] [--csv-delimiter=C]\n"
    "                      [--no-header]\n"
    "                      [--label-column=NAME]\n"
    "  MODEL   an export directory (model.json + model.safetensors) or a checkpoint\n"
    "  INPUT   examples in CSV, IDX or .npy; a CSV may hold the training label column,\n"
    "          which is left out\n"
    "  writes one row per example: CSV (row,class[,label],p_<class>...) or, with --jsonl,\n"
    "  JSON lines; for regression the predicted value\n";
  const std::vector<std::string> options = {"output",        "jsonl",     "labels",      "format",
                                            "csv-delimiter", "no-header", "label-column"};
  return tools::run_model_tool(
    "troupe-predict", argc, argv, options, usage, 2,
    [](exported_model& model, const tools::command_line& cl) {
      auto& card = model.card;
      auto split = tools::input_split(card, cl, cl.positional[1], false);
      std::ofstream file;
      if (cl.options.count("output")) {
        file.open(cl.options.at("output"));
        if (!file)
          throw data_error(cl.options.at("output") + ": cannot write");
      }
      prediction_writer writer(cl.options.count("output") ? file : std::cout, card,
                               cl.options.count("jsonl") > 0);
      writer.header();
      tensor outputs;
      uint64_t row = 0;
      example_source source(split, 0);
      tools::for_each_batch(source, num_elements(card.input), false,
                            [&](const batch& b, int64_t n) {
                              predict_batch(model, b, outputs);
                              for (int64_t r = 0; r < n; ++r, ++row)
                                writer.write(row, outputs.data() + r * card.classes);
                            });
      std::fprintf(stderr, "troupe-predict: %llu prediction(s)\n",
                   static_cast<unsigned long long>(row));
      return tools::exit_ok;
    });
}
