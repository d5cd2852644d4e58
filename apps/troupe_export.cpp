// troupe-export CHECKPOINT OUTDIR: the model of a checkpoint as an export
// directory (model.safetensors + model.json; tensor/export/model_export.hpp),
// for troupe-predict, troupe-eval or any safetensors reader. The network's
// description comes from the run's model.json beside the checkpoints (or
// --card=FILE).
#include <cstdio>

#include "apps/model_tools.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/export/table_export.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-export CHECKPOINT OUTDIR [--card=MODEL_JSON]\n"
    "  CHECKPOINT  a checkpoint directory, e.g. logs/run/ckpt-3000\n"
    "  OUTDIR      receives model.safetensors (whole variables, no optimizer slots; an\n"
    "              embedding model's table as embedding/keys and embedding/values),\n"
    "              model.onnx (not for a hash table) and model.json (the network, input\n"
    "              shape, classes, labels, normalisation)\n"
    "  --card      the run's model.json, when it is not in CHECKPOINT/..\n";
  auto cl = tools::parse_command_line(argc, argv, {"card"}, usage, 2);
  return tools::run_tool("troupe-export", [&] {
    // A hash table's rows go from the checkpoint's files to the export a
    // range at a time, never loaded whole.
    auto loaded = load_model_to_export(cl.positional[0], cl.option("card"));
    auto& model = loaded.model;
    auto written = write_model_export(cl.positional[1], model.card, model.net->variables(),
                                      model.params, loaded.rows.get());
    json_writer line;
    line.begin_object().key("event").string("export").key("dir").string(cl.positional[1]);
    line.key("files").string(written);
    line.key("step").integer(model.card.step).key("variables").integer(model.params.size());
    if (loaded.rows)
      line.key("embedding_rows").integer(loaded.rows->rows());
    std::printf("%s\n", line.end_object().text().c_str());
    return tools::exit_ok;
  });
}
