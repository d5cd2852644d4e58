// troupe-export CHECKPOINT OUTDIR: the model of a checkpoint as an export
// directory (model.safetensors + model.json; tensor/export/model_export.hpp),
// for troupe-predict, troupe-eval or any safetensors reader. The network's
// description comes from the run's model.json beside the checkpoints (or
// --card=FILE).
#include <cstdio>

#include "apps/model_tools.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-export CHECKPOINT OUTDIR [--card=MODEL_JSON]\n"
    "  CHECKPOINT  a checkpoint directory, e.g. logs/run/ckpt-3000\n"
    "  OUTDIR      receives model.safetensors (whole variables, no optimizer slots) and\n"
    "              model.json (the network, input shape, classes, labels, normalisation)\n"
    "  --card      the run's model.json, when it is not in CHECKPOINT/..\n";
  auto cl = tools::parse_command_line(argc, argv, {"card"}, usage);
  if (cl.positional.size() != 2) {
    std::cerr << usage;
    return tools::exit_usage;
  }
  return tools::run_tool("troupe-export", [&] {
    auto card = cl.options.count("card") ? cl.options.at("card") : std::string{};
    auto model = load_model(cl.positional[0], card);
    write_model_export(cl.positional[1], model.card, model.net->variables(), model.params);
    std::printf("{\"event\":\"export\",\"dir\":\"%s\",\"step\":%lld,\"variables\":%zu}\n",
                cl.positional[1].c_str(), static_cast<long long>(model.card.step),
                model.params.size());
    return tools::exit_ok;
  });
}
