#include "apps/node/evaluator_job.hpp"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_source.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/export/model_export.hpp"
#include "tensor/nn/metric.hpp"
#include "tensor/summary/event_file.hpp"

namespace troupe {

namespace {

constexpr int exit_ok = 0; // as troupe-node's
constexpr int exit_failure = 1;

class checkpoint_follower {
public:
  checkpoint_follower(caf::actor_system& sys, const node_setup& setup, chief_finder find_chief)
    : sys_(sys), setup_(setup), find_chief_(std::move(find_chief)) {}

  // The chief's checkpoint source, reached within `within`. One actor asks
  // everything from then on: the source knows its followers by it and waits
  // for them at the end of the run. A fresh one after a failure, so that a
  // late answer to the old one cannot pass for the answer to a new question.
  bool follow(std::chrono::milliseconds within) {
    self_.reset();
    auto chief = find_chief_(within);
    if (!chief) {
      spdlog::error("evaluator: {}", describe(chief.error()));
      return false;
    }
    self_ = std::make_unique<caf::scoped_actor>(sys_);
    bool ok = false;
    (*self_)->send(*chief, follow_atom::value);
    (*self_)->receive(
      [&](checkpoint_source_actor& found) {
        source_ = found, ok = true;
        (*self_)->monitor(source_); // a chief that dies ends a wait at once, not at the timeout
      },
      [&](caf::error& err) { spdlog::error("evaluator: the chief: {}", describe(err)); },
      caf::after(setup_.runtime.request_timeout) >>
        [] {
          spdlog::error("evaluator: the chief did not answer within cluster.request-timeout");
        });
    return ok;
  }

  caf::expected<checkpoint_listing> newest_after(int64_t step) {
    caf::expected<checkpoint_listing> out{caf::sec::request_timeout};
    (*self_)->send(source_, ckpt_list_atom::value, step);
    (*self_)->receive(
      [&](checkpoint_listing& l) { out = std::move(l); },
      [&](caf::error& err) { out = std::move(err); },
      [&](caf::down_msg&) { out = caf::make_error(caf::sec::request_receiver_down); },
      caf::after(setup_.runtime.request_timeout) >> [] {});
    return out;
  }

  std::string read(int64_t step, const std::string& name, uint64_t offset) {
    std::optional<std::string> out;
    std::string why = "no answer within cluster.request-timeout";
    (*self_)->send(source_, ckpt_read_atom::value, step, name, offset);
    (*self_)->receive([&](std::string& bytes) { out = std::move(bytes); },
                      [&](caf::error& err) { why = describe(err); },
                      [&](caf::down_msg&) { why = "the chief is gone"; },
                      caf::after(setup_.runtime.request_timeout) >> [] {});
    if (!out)
      throw checkpoint_error("reading " + name + " from the chief: " + why);
    return *out;
  }

private:
  caf::actor_system& sys_;
  const node_setup& setup_;
  chief_finder find_chief_;
  std::unique_ptr<caf::scoped_actor> self_;
  checkpoint_source_actor source_;
};

// Copies the listed checkpoint, scores it on the evaluation set, and logs
// and writes the score (TensorBoard scalars under <log-dir>/eval).
void evaluate_checkpoint(checkpoint_follower& chief, checkpoint_fetcher& fetcher,
                         const checkpoint_listing& listing, const evaluation_set& test,
                         const node_setup& setup, std::unique_ptr<event_file>& events) {
  auto step = listing.step;
  auto copy = fetcher.fetch(listing, [&](const std::string& name, uint64_t offset) {
    return chief.read(step, name, offset);
  });
  auto model = load_model(copy.checkpoint, copy.card);
  auto stats = evaluate_dataset(*model.net, model.params, test);
  auto metric = metric_of(setup.train.data.task, stats.loss, stats.correct, stats.examples);
  spdlog::info("evaluator: checkpoint {} (step {}): test_{}={:.4f} test_loss={:.4f}",
               "ckpt-" + std::to_string(step), model.card.step, metric.name, metric.value,
               stats.loss);
  if (!events)
    events = std::make_unique<event_file>(setup.train.checkpoint.log_dir + "/eval");
  events->scalars(step,
                  {{std::string("eval/test_") + metric.name, static_cast<float>(metric.value)},
                   {"eval/test_loss", static_cast<float>(stats.loss)}});
  events->flush();
}

} // namespace

int run_evaluator(caf::actor_system& sys, const node_setup& setup, uint64_t model_bytes,
                  chief_finder find_chief) {
  auto& dir = setup.train.checkpoint.log_dir;
  auto idle_limit = setup.train.checkpoint.save_interval + setup.runtime.recovery_timeout;
  evaluation_set test(setup.data->evaluation(),
                      static_cast<uint64_t>(setup.train.data.eval_memory_bytes));
  // Values, optimizer slots (Adam: two), the manifest: far below this.
  checkpoint_fetcher fetcher(dir + "/eval/fetched", 8 * model_bytes + (uint64_t{64} << 20));
  checkpoint_follower chief{sys, setup, std::move(find_chief)};
  spdlog::info("evaluator: following the chief's checkpoints at {} (until step {}), evaluating on "
               "{} examples",
               setup.cluster.chief[0].to_string(), setup.train.last_step, test.size());
  if (!chief.follow(setup.runtime.connect_timeout))
    return exit_failure;
  std::unique_ptr<event_file> events;
  int64_t evaluated = -1;
  auto last_news = std::chrono::steady_clock::now();
  while (true) {
    auto listing = chief.newest_after(evaluated);
    if (!listing) {
      spdlog::warn("evaluator: lost the chief ({}); looking for it again",
                   describe(listing.error()));
      if (!chief.follow(setup.runtime.recovery_timeout))
        return exit_failure;
      continue;
    }
    if (listing->step > evaluated) {
      try {
        evaluate_checkpoint(chief, fetcher, *listing, test, setup, events);
        evaluated = listing->step;
        last_news = std::chrono::steady_clock::now();
      } catch (const checkpoint_error& e) {
        // keep-N deleted it while it was copied: the next listing names a
        // newer one. Asked again by a fresh actor (a late answer to this
        // copy must not answer the next question).
        spdlog::info("evaluator: skipping checkpoint {}: {}", listing->step, e.what());
        if (!chief.follow(setup.runtime.recovery_timeout))
          return exit_failure;
      }
      continue;
    }
    if (listing->final) {
      spdlog::info("evaluator: the run is over; evaluated up to step {}; done", evaluated);
      return exit_ok;
    }
    if (std::chrono::steady_clock::now() - last_news > idle_limit) {
      spdlog::error(
        "evaluator: no new checkpoint from the chief for {} s (checkpoint.save-interval "
        "+ cluster.recovery-timeout); did training stop?",
        std::chrono::duration_cast<std::chrono::seconds>(idle_limit).count());
      return exit_failure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

} // namespace troupe
