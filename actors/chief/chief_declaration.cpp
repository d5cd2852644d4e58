// A run whose model its workers' programs declare (train.model = declared):
// the first declaration the chief accepts is placed and initialised (its
// first values, or the checkpoint's), every later one must equal it, and
// the workers' reported metrics are kept for the final line.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "tensor/checkpoint/restore.hpp"

namespace troupe::chief_run {

namespace {

caf::error refuse_declaration(self_ptr self, int32_t index, const std::string& why) {
  return refuse("chief", "the model declared by worker:" + std::to_string(index),
                self->current_sender(), why);
}

} // namespace

bool declared_run(self_ptr self) {
  return self->state.config.train.model == model_kind::declared;
}

caf::result<training_plan> on_declared_ready(self_ptr self, int32_t index,
                                             model_declaration& declaration) {
  auto& st = self->state;
  if (!declared_run(self))
    return refuse_declaration(self, index,
                              "this run trains model " + std::string(name_of(st.config.train.model))
                                + " (train.model); a worker's program declares its model only "
                                  "where the cluster's configuration says train.model = declared");
  if (index < 0 || index >= st.roster->size())
    return on_ready(self, index); // refused there, with the range
  if (st.links.net) {
    if (auto differs = declaration_difference(*st.links.net->declaration(), declaration))
      return refuse_declaration(self, index,
                                "it differs from the run's model: " + *differs
                                  + "; every worker must run the same module");
    return on_ready(self, index);
  }
  std::shared_ptr<model> net;
  try {
    net = std::make_shared<declared_model>(std::move(declaration));
  } catch (const std::exception& e) {
    return refuse_declaration(self, index, e.what());
  }
  if (auto& ckpt = st.links.restore_from) {
    auto problems = restore_problems(
      ckpt->manifest(),
      checkpoint_fingerprint(model_kind::declared, st.config.train.optimizer.kind),
      net->variables());
    if (!problems.empty()) {
      std::string why = "checkpoint " + ckpt->dir() + " cannot be restored into it:";
      for (auto& p : problems)
        why += " " + p + ";";
      why += " run the module the checkpoint was written with, or start the chief with "
             "--restore=never";
      spdlog::error("chief: {}", why);
      return refuse_declaration(self, index, why);
    }
  }
  spdlog::info("chief: worker:{} declared the model: {} variable(s), {} table(s)", index,
               net->variables().size(), net->tables().size());
  st.links.net = std::move(net);
  try {
    initialize_shards(self);
  } catch (const std::exception& e) {
    abort_run(self, e.what());
  }
  return on_ready(self, index);
}

caf::result<training_plan> on_undeclared_ready(self_ptr self, int32_t index) {
  if (declared_run(self))
    return refuse("chief", "a ready request of worker:" + std::to_string(index),
                  self->current_sender(),
                  "this run's model is declared by its workers' programs (train.model = "
                  "declared): a worker without a declaration cannot take part; run the workers "
                  "with the troupe Python package");
  return on_ready(self, index);
}

void on_metrics(self_ptr self, const reported_metrics& m) {
  auto& st = self->state;
  auto holder = st.roster->holder(m.worker);
  auto sender = self->current_sender();
  if (m.run != st.run || !holder || !sender || sender->address() != *holder) {
    refuse("chief", "metrics claiming worker:" + std::to_string(m.worker), sender,
           "only the worker admitted under that index reports for it");
    return;
  }
  if (m.names.size() != m.values.size() || m.names.size() > reported_metrics::max_names) {
    refuse("chief", "metrics of worker:" + std::to_string(m.worker), sender,
           "names and values differ in number, or more than "
             + std::to_string(reported_metrics::max_names));
    return;
  }
  for (size_t i = 0; i < m.names.size(); ++i) {
    if (m.names[i].empty() || m.names[i].size() > reported_metrics::max_name)
      continue;
    st.reported[m.names[i]] = m.values[i];
  }
}

} // namespace troupe::chief_run
