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

} // namespace

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-predict MODEL INPUT [--output=FILE] [--jsonl] [--labels=FILE]\n"
    "                      [--format=idx|csv|npy] [--csv-delimiter=C] [--no-header]\n"
    "                      [--label-column=NAME]\n"
    "  MODEL   an export directory (model.json + model.safetensors) or a checkpoint\n"
    "  INPUT   examples in CSV, IDX or .npy; a CSV may hold the training label column,\n"
    "          which is left out\n"
    "  writes one row per example: CSV (row,class[,label],p_<class>...) or, with --jsonl,\n"
    "  JSON lines; for regression the predicted value\n";
  auto cl = tools::parse_command_line(
    argc, argv,
    {"output", "jsonl", "labels", "format", "csv-delimiter", "no-header", "label-column"}, usage);
  if (cl.positional.size() != 2) {
    std::cerr << usage;
    return tools::exit_usage;
  }
  return tools::run_tool("troupe-predict", [&] {
    auto model = load_model(cl.positional[0]);
    auto& card = model.card;
    auto split = tools::input_split(card, cl, cl.positional[1], false);
    std::ofstream file;
    if (cl.options.count("output")) {
      file.open(cl.options.at("output"));
      if (!file)
        throw data_error(cl.options.at("output") + ": cannot write");
    }
    std::ostream& out = cl.options.count("output") ? file : std::cout;
    bool jsonl = cl.options.count("jsonl") > 0;
    bool regression = card.task == objective::regression;
    auto classes = card.classes;
    if (!jsonl) {
      out << (regression ? "row,value" : "row,class");
      if (!regression && !card.label_names.empty())
        out << ",label";
      for (int64_t c = 0; !regression && c < classes; ++c)
        out << ",p_"
            << (card.label_names.empty() ? std::to_string(c)
                                         : card.label_names[static_cast<size_t>(c)]);
      out << "\n";
    }
    auto features = num_elements(card.input);
    constexpr int64_t batch_rows = 256;
    tensor inputs, outputs;
    std::vector<double> p;
    uint64_t row = 0;
    example_source source(split, 0);
    char number[32];
    for (bool more = true; more;) {
      inputs.resize({batch_rows, features});
      int64_t n = 0;
      int32_t label;
      float target;
      while (n < batch_rows && (more = source.next(inputs.data() + n * features, label, target)))
        ++n;
      if (n == 0)
        break;
      inputs.resize({n, features}); // the last batch: its first n rows, in place
      model.net->predict(model.params, inputs, outputs);
      for (int64_t r = 0; r < n; ++r, ++row) {
        const float* o = outputs.data() + r * classes;
        if (regression) {
          std::snprintf(number, sizeof number, "%.9g", static_cast<double>(o[0]));
          out << (jsonl ? "{\"row\":" + std::to_string(row) + ",\"value\":" + number + "}"
                        : std::to_string(row) + "," + number)
              << "\n";
          continue;
        }
        probabilities(o, classes, p);
        auto best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
        std::string line = jsonl ? "{\"row\":" + std::to_string(row)
                                     + ",\"class\":" + std::to_string(best)
                                 : std::to_string(row) + "," + std::to_string(best);
        if (!card.label_names.empty())
          line += jsonl ? ",\"label\":" + json_string(card.label_names[best])
                        : "," + card.label_names[best];
        line += jsonl ? ",\"probabilities\":[" : "";
        for (size_t c = 0; c < p.size(); ++c) {
          std::snprintf(number, sizeof number, "%.9g", p[c]);
          line += (jsonl ? (c ? "," : "") : ",") + std::string(number);
        }
        out << line << (jsonl ? "]}" : "") << "\n";
      }
    }
    std::fprintf(stderr, "troupe-predict: %llu prediction(s)\n",
                 static_cast<unsigned long long>(row));
    return tools::exit_ok;
  });
}
