// troupe-export CHECKPOINT OUTDIR: the model of a checkpoint as an export
// directory (model.safetensors + model.json; tensor/export/model_export.hpp),
// for troupe-predict, troupe-eval or any safetensors reader. The network's
// description comes from the run's model.json beside the checkpoints (or
// --card=FILE). With --apply, a serving directory's base and deltas
// composed into the export of the last delta's version
// (tensor/export/delta_export.hpp).
#include <cstdio>

#include "apps/model_tools.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/export/delta_export.hpp"
#include "tensor/export/table_export.hpp"

using namespace troupe;

namespace {

// A delta named by its header (delta-<v>.json) or by its data file.
std::string header_of(std::string delta) {
  const std::string data = ".safetensors";
  if (delta.size() > data.size()
      && delta.compare(delta.size() - data.size(), data.size(), data) == 0)
    delta.replace(delta.size() - data.size(), data.size(), ".json");
  return delta;
}

int apply_deltas(const tools::command_line& cl) {
  auto out = cl.option("out");
  if (out.empty())
    throw data_error("--apply needs --out=DIR, the directory the composed export goes to");
  auto served = read_base(cl.positional[0]);
  for (size_t i = 1; i < cl.positional.size(); ++i)
    apply_delta(served, read_delta(header_of(cl.positional[i]), served.model));
  write_served(out, served);
  json_writer line;
  line.begin_object().key("event").string("apply").key("dir").string(out);
  line.key("version").integer(served.version).key("step").integer(served.model.card.step);
  line.key("deltas").integer(static_cast<int64_t>(cl.positional.size() - 1));
  if (served.model.table)
    line.key("embedding_rows").integer(static_cast<int64_t>(served.model.table->rows()));
  std::printf("%s\n", line.end_object().text().c_str());
  return tools::exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-export CHECKPOINT OUTDIR [--card=MODEL_JSON]\n"
    "       troupe-export --apply BASE [DELTA...] --out=OUTDIR\n"
    "  CHECKPOINT  a checkpoint directory, e.g. logs/run/ckpt-3000\n"
    "  OUTDIR      receives model.safetensors (whole variables, no optimizer slots; an\n"
    "              embedding model's table as embedding/keys and embedding/values),\n"
    "              model.onnx (not for a hash table) and model.json (the network, input\n"
    "              shape, classes, labels, normalisation)\n"
    "  --card      the run's model.json, when it is not in CHECKPOINT/..\n"
    "  --apply     compose a base directory (serving/base-<v>) and the deltas after it\n"
    "              (serving/delta-<v>.json or .safetensors), in order, into the export of\n"
    "              the last one's version, with its version.json; a delta out of order,\n"
    "              damaged or not finite is refused, naming both versions\n";
  bool applying = false;
  for (int i = 1; i < argc; ++i)
    applying = applying || std::string(argv[i]) == "--apply";
  auto cl = applying ? tools::parse_command_line(argc, argv, {"apply", "out"}, usage, 1, 1 << 20)
                     : tools::parse_command_line(argc, argv, {"card"}, usage, 2);
  return tools::run_tool("troupe-export", [&] {
    if (applying)
      return apply_deltas(cl);
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
