#include "actors/chief/evaluator.hpp"

#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace troupe {

evaluator_actor::behavior_type evaluator(evaluator_actor::pointer self, std::shared_ptr<model> net,
                                         std::shared_ptr<const dataset> test) {
  return {
    [self, net, test](
      evaluate_atom, const std::vector<tensor>& values) -> caf::result<double, uint64_t, uint64_t> {
      self->quit();
      try {
        auto stats = evaluate_dataset(*net, values, *test);
        return {stats.loss, static_cast<uint64_t>(stats.correct),
                static_cast<uint64_t>(stats.examples)};
      } catch (const std::exception& e) {
        return caf::make_error(caf::sec::runtime_error,
                               std::string("evaluation failed: ") + e.what());
      }
    },
  };
}

} // namespace troupe
