// Reading every variable's current value (the final values, and those of
// each evaluation) from the shards, through a value_reader of its own (the
// shard exchange: bulk links where shards offer them, BASP elsewhere), then
// gathered into whole variables in model order.
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/chief/chief_run.hpp"
#include "actors/chief/value_reader.hpp"

namespace troupe::chief_run {

void read_values(self_ptr self, std::function<void(std::vector<tensor>)> done,
                 std::function<void(const std::string&)> failed) {
  auto& st = self->state;
  value_read_job job{st.run, st.links.shards, st.router->parts(), st.links.bulk,
                     st.config.runtime.request_timeout};
  auto result = std::make_shared<value_read_result>();
  auto reader = st.config.detached_evaluation
                  ? self->spawn<caf::detached>(value_reader, std::move(job), result)
                  : self->spawn(value_reader, std::move(job), result);
  // Opening the bulk links, the read, and a read over BASP after a failed one.
  auto within = st.config.runtime.request_timeout * 3;
  self->request(reader, within, caf::get_atom::value)
    .then(
      [self, result, done, failed](caf::ok_atom) {
        if (!result->error.empty()) {
          failed(result->error);
          return;
        }
        auto& st = self->state;
        std::vector<tensor> params;
        for (auto& v : st.links.net->variables())
          params.emplace_back(v.shape);
        try {
          for (size_t i = 0; i < st.router->parts().size(); ++i)
            st.router->gather(st.router->parts()[i], std::move(result->values[i]), params);
        } catch (const std::exception& e) {
          failed(e.what());
          return;
        }
        done(std::move(params));
      },
      [failed](caf::error& err) { failed(describe(err)); });
}

} // namespace troupe::chief_run
