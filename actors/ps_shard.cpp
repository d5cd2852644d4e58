#include "actors/ps_shard.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

ps_shard_actor::behavior_type ps_shard(ps_shard_actor::stateful_pointer<ps_shard_state> self,
                                       ps_shard_config config) {
  auto& st = self->state;
  st.label = "ps:" + std::to_string(config.index);
  st.store.emplace(st.label, config.learning_rate);
  self->set_down_handler([self](const caf::down_msg& msg) {
    spdlog::error("{}: lost the chief ({}); shutting down: the run cannot go on without it",
                  self->state.label, self->system().render(msg.reason));
    self->quit(msg.reason);
  });
  if (config.init_timeout.count() > 0)
    self->delayed_send(self, config.init_timeout, tick_atom::value);
  return {
    [self](hello_atom, uint32_t version, const std::string& job,
           int32_t task) -> caf::result<uint32_t> {
      return answer_hello(version, job, task, self->state.label);
    },
    [self](init_atom, const std::vector<std::string>& names,
           std::vector<tensor>& values) -> caf::result<caf::ok_atom> {
      if (auto err = self->state.store->initialize(names, std::move(values)))
        return make_error(*err);
      // The chief that initialised us owns the run: follow it down.
      if (auto chief = caf::actor_cast<caf::actor>(self->current_sender()))
        self->monitor(chief);
      spdlog::info("{}: initialised {} variable(s), {} bytes", self->state.label,
                   self->state.store->size(), self->state.store->bytes());
      return caf::ok_atom::value;
    },
    [self](pull_atom, const std::vector<std::string>& names) -> caf::result<pull_reply> {
      pull_reply reply;
      if (auto err = self->state.store->read(names, reply.values))
        return make_error(*err);
      reply.version = self->state.store->version();
      return reply;
    },
    [self](push_atom, int64_t step, const std::vector<std::string>& names,
           const std::vector<tensor>& gradients) -> caf::result<int64_t> {
      if (auto err = self->state.store->apply_gradients(names, gradients)) {
        spdlog::warn("{}: refused push for step {}: {}", self->state.label, step,
                     err->message);
        return make_error(*err);
      }
      return self->state.store->version();
    },
    [self](stop_atom) {
      spdlog::info("{}: stop after {} update(s)", self->state.label,
                   self->state.store->version());
      self->quit(caf::exit_reason::normal);
    },
    [self](tick_atom) {
      if (self->state.store->initialized())
        return;
      spdlog::error("{}: no chief initialised this shard in time (cluster.connect-timeout); "
                    "is the chief running and does it list this address?",
                    self->state.label);
      self->quit(make_error({errc::not_initialized, "no chief came"}));
    },
  };
}

} // namespace troupe
