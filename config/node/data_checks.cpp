// The data part of loading a node's configuration (load_steps.hpp): the
// catalogue of the files a task reads, the shapes taken from it, and the
// checks that need the data's size (batches, every worker's share, epochs).
#include "config/node/load_steps.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/data/stream.hpp"

namespace troupe::load_steps {

namespace {

bool reads_data(const node_setup& setup) {
  // A declared model's batches come from its workers' programs.
  return setup.train.model != model_kind::declared
         && (setup.whole_cluster || setup.job != job_kind::ps);
}

} // namespace

// Tasks that read data catalogue it (every file read once, the same on
// every task) and take one example's shape and the classes from it,
// checked against [model] where that gives them.
void catalog_for_node(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  auto& t = setup.train;
  if (!reads_data(setup)) {
    // A ps task reads no data: it knows the shapes where the files are
    // Fashion-MNIST's or the config gives them ([model] or [data]), and
    // checks the model (and bounds what it accepts) by them.
    bool fashion_mnist = t.data.train.empty();
    t.network.input = !cfg.model_input.empty()      ? cfg.model_input
                      : !t.data.input_shape.empty() ? t.data.input_shape
                      : fashion_mnist               ? shape_t{28, 28, 1}
                                                    : shape_t{};
    t.network.classes = t.data.task == objective::regression ? 1
                        : cfg.model_classes > 0              ? cfg.model_classes
                        : t.data.classes > 0                 ? t.data.classes
                        : fashion_mnist                      ? 10
                                                             : 0;
    return;
  }
  if (!data_option_problems(t.data).empty())
    return;
  // A fixed-size table's ids are checked as the files are read (bad records).
  if (uses_embeddings(t.model, t.network.layers) && t.embedding.kind == table_kind::fixed
      && t.embedding.ids == id_mapping::identity && embedding_problems(t.embedding).empty())
    t.data.csv.vocabulary = t.embedding.vocabulary;
  try {
    auto catalog = std::make_shared<data_catalog>(catalog_data(t.data, t.data_dir));
    setup.data = catalog;
  } catch (const data_error& e) {
    std::string why = e.what();
    if (t.data.train.empty())
      why += "; install Debian's dataset-fashion-mnist package, point train.data-dir at a "
             "directory with the four MNIST-format .gz files, or name your files in [data]";
    errors.push_back(std::string("data: ") + why);
    setup.data_unreadable = true;
    return;
  }
  auto& data = *setup.data->train;
  if (!cfg.model_input.empty() && num_elements(cfg.model_input) != data.features()) {
    errors.push_back("model.input = " + to_string(cfg.model_input) + " holds "
                     + std::to_string(num_elements(cfg.model_input))
                     + " values per example, but the data's examples have shape "
                     + to_string(data.item_shape) + " (" + std::to_string(data.features())
                     + " values); remove model.input or set data.input-shape");
    return;
  }
  if (cfg.model_classes > 0 && cfg.model_classes != data.classes) {
    errors.push_back("model.classes = " + std::to_string(cfg.model_classes) + ", but the data has "
                     + std::to_string(data.classes)
                     + " classes; remove model.classes or set data.classes");
    return;
  }
  t.network.input = cfg.model_input.empty() ? data.item_shape : cfg.model_input;
  t.network.classes = data.classes;
  t.network.keys = data.keys;
}

// Checks that need the data's size: every batch fits the training set;
// train.epochs becomes last_step, the same on every task.
void check_data_size(node_setup& setup, std::vector<std::string>& errors) {
  if (!setup.data || !errors.empty())
    return;
  auto& t = setup.train;
  if (!setup.data->train->follow.empty()) {
    // A followed directory has no size and fixed shares.
    if (t.epochs > 0)
      errors.push_back("train.epochs needs the data's size, which a followed directory "
                       "(data.follow) does not have: set train.last-step (0: until stopped)");
    if (setup.runtime.max_workers > 0)
      errors.push_back("data.follow shares the stream's files among a fixed set of workers: set "
                       "cluster.max-workers = 0");
    if (t.pull_ahead)
      errors.push_back("data.follow waits for files between steps, which train.pull-ahead does "
                       "not: set train.pull-ahead = false");
    return;
  }
  uint64_t examples = setup.data->train->usable_records();
  auto shape = setup.cluster.shape();
  auto capacity = worker_capacity(setup.runtime, shape.workers);
  for (int32_t w = 0; w < capacity; ++w)
    if (static_cast<uint64_t>(batch_size_of(t, w)) > examples) {
      errors.push_back("the batch of worker:" + std::to_string(w) + " ("
                       + std::to_string(batch_size_of(t, w)) + ") is larger than the "
                       + std::to_string(examples)
                       + " training examples; lower train.batch-size or train.worker-batch-sizes");
      return;
    }
  // The listed workers' shares, and the smallest ones elastic membership
  // can give (every index up to cluster.max-workers taking part).
  for (auto count : {shape.workers, capacity}) {
    for (int32_t w = 0; w < count; ++w)
      try {
        share_of(*setup.data->train, static_cast<size_t>(w), static_cast<size_t>(count));
      } catch (const troupe_error& e) {
        errors.push_back(std::string("data: ") + e.what()
                         + (count > shape.workers ? " (lower cluster.max-workers)" : ""));
        return;
      }
    if (capacity == shape.workers)
      break;
  }
  if (t.epochs > 0)
    try {
      t.last_step = last_step_for_epochs(t, shape, examples);
    } catch (const std::exception& e) {
      errors.push_back(std::string("train.epochs: ") + e.what());
    }
}

} // namespace troupe::load_steps
