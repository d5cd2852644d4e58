#include "apps/node/artifacts.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include <spdlog/spdlog.h>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json.hpp"
#include "tensor/export/table_export.hpp"

namespace troupe::node {

// Written from the options the model is built from, so that the card says
// what the network is (a deepfm's hidden layers are embedding.deep-layers).
model_card card_of(const node_setup& setup, int64_t step) {
  auto options = model_options_of(setup.train);
  auto net = make_model(setup.train.model, options);
  auto card = describe_model(setup.train.model, *net, setup.data->train.get(), step);
  if (!net->tables().empty()) {
    auto& t = setup.train;
    card.deep_layers = options.deep_layers;
    card.table_init = table_setup_of(t.embedding, net->tables()[0], t.seed).table.init;
    card.categorical_columns = t.data.csv.categorical_columns;
    card.ignore_columns = t.data.csv.ignore_columns;
    if (t.embedding.kind == table_kind::fixed) {
      card.vocabulary = t.embedding.vocabulary;
      card.ids = t.embedding.ids;
    }
  }
  return card;
}

// Saved with the run so that evaluation and prediction later transform
// examples the same way.
std::string announce_data(const node_setup& setup) {
  if (!setup.data) // a declared model's program brings the data
    return "";
  auto& catalog = *setup.data;
  for (auto& line : describe_lines(catalog))
    spdlog::info("{}", line);
  auto& dir = setup.train.checkpoint.log_dir;
  if (!dir.empty()) {
    try {
      std::filesystem::create_directories(dir);
      write_file_atomically(dir + "/data.json", describe_json(catalog) + "\n");
      write_file_atomically(dir + "/model.json", json::write(card_of(setup, 0).to_json()) + "\n");
    } catch (const std::exception& e) {
      spdlog::warn("could not save the data's and the model's description in {}: {}", dir,
                   e.what());
    }
  }
  return data_summary_json(catalog);
}

void export_model(const node_setup& setup, const training_result& result) {
  auto& dir = setup.train.checkpoint.log_dir;
  if (dir.empty() || !result.ok || result.values.empty())
    return;
  if (setup.train.model == model_kind::declared) {
    spdlog::info("a declared model's trained values are its final checkpoint in {}: load them "
                 "into the module with troupe.torch.load(module, \"{}\")",
                 dir, dir);
    return;
  }
  if (setup.train.model == model_kind::synthetic) {
    spdlog::info("model synthetic (a benchmark's) is not exported; its checkpoints are in {}", dir);
    return;
  }
  try {
    auto net = make_model(setup.train.model, model_options_of(setup.train));
    auto card = card_of(setup, result.global_step);
    // An embedding table's rows: the final checkpoint's, saved at this step
    // (a hash table's streamed from its files into the export).
    std::optional<checkpoint_reader> saved;
    std::unique_ptr<table_rows> table;
    if (card.has_table()) {
      saved.emplace(dir + "/ckpt-" + std::to_string(result.global_step));
      table = rows_of_checkpoint(*saved, card);
    }
    auto written = write_model_export(dir + "/export", card, net->variables(), result.values,
                                      table.get());
    spdlog::info("model exported to {}/export ({})", dir, written);
  } catch (const std::exception& e) {
    spdlog::error("could not export the model to {}/export: {}", dir, e.what());
  }
}

// stdout may be a pipe whose reader has gone (troupe-node | head -3):
// SIGPIPE is ignored, so the write fails instead of killing the node.
void print_final(const training_result& r) {
  auto text = (r.traffic.empty() ? std::string() : r.traffic_json() + "\n") + r.to_json() + "\n";
  errno = 0;
  std::cout << text << std::flush;
  if (!std::cout)
    spdlog::error("the final line could not be written to stdout ({}); it was: {}",
                  errno ? std::strerror(errno) : "stream error", r.to_json());
}

} // namespace troupe::node
