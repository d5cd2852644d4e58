#include "apps/node/evaluator_job.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/checkpoint_source.hpp"
#include "apps/node/process.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/export/model_export.hpp"
#include "tensor/export/model_score.hpp"
#include "tensor/nn/metric.hpp"
#include "tensor/summary/event_file.hpp"

namespace troupe {

namespace {

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

  // One piece at a time, each read showing the last piece's token (the
  // source counts a piece on its way until then).
  std::string read(int64_t step, const std::string& name, uint64_t offset) {
    std::optional<std::string> out;
    std::string why = "no answer within cluster.request-timeout";
    (*self_)->send(source_, ckpt_read_atom::value, step, name, offset, last_token_);
    (*self_)->receive(
      [&](checkpoint_chunk& piece) {
        last_token_ = piece.token;
        out = std::move(piece.bytes);
      },
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
  uint64_t last_token_ = 0;
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
  model_scorer scores(model);
  batch b;
  for (auto examples = test.read(1000); examples.next(b);)
    scores.add(b);
  auto metric = metric_of(setup.train.data.task, scores.loss(), scores.correct(),
                          scores.examples());
  std::string auc_text;
  std::vector<std::pair<std::string, float>> scalars{
    {std::string("eval/test_") + metric.name, static_cast<float>(metric.value)},
    {"eval/test_loss", static_cast<float>(scores.loss())}};
  if (scores.binary()) { // a model over an embedding table, as the chief reports it
    auc_text = fmt::format("test_auc={:.4f} test_logloss={:.4f} ", scores.auc(), scores.logloss());
    scalars.push_back({"eval/test_auc", static_cast<float>(scores.auc())});
    scalars.push_back({"eval/test_logloss", static_cast<float>(scores.logloss())});
  }
  spdlog::info("evaluator: checkpoint {} (step {}): {}test_{}={:.4f} test_loss={:.4f}",
               "ckpt-" + std::to_string(step), model.card.step, auc_text, metric.name, metric.value,
               scores.loss());
  if (!events)
    events = std::make_unique<event_file>(setup.train.checkpoint.log_dir + "/eval");
  events->scalars(step, scalars);
  events->flush();
}

// What a listing may announce in all. Values, optimizer slots (Adam: two)
// and the manifest are far below 8x the model. An embedding table adds its
// rows: at most twice embedding.max-bytes-per-shard per shard where that
// caps them, else what the disk the copies go to has free.
uint64_t checkpoint_bound(const node_setup& setup, uint64_t model_bytes,
                          const std::string& fetch_dir) {
  uint64_t bound = 8 * model_bytes + (uint64_t{64} << 20);
  if (!uses_embeddings(setup.train.model, setup.train.network.layers))
    return bound;
  if (auto cap = setup.train.embedding.max_bytes_per_shard; cap > 0)
    return bound + 2 * static_cast<uint64_t>(cap) * setup.cluster.ps.size();
  std::error_code ec;
  std::filesystem::path where = fetch_dir;
  while (!where.empty() && !std::filesystem::exists(where, ec))
    where = where.parent_path();
  auto space = std::filesystem::space(where.empty() ? std::filesystem::path(".") : where, ec);
  return ec ? bound : bound + space.available;
}

} // namespace

int run_evaluator(caf::actor_system& sys, const node_setup& setup, uint64_t model_bytes,
                  chief_finder find_chief) {
  auto& dir = setup.train.checkpoint.log_dir;
  auto idle_limit = setup.train.checkpoint.save_interval + setup.runtime.recovery_timeout;
  evaluation_set test(setup.data->evaluation(),
                      static_cast<uint64_t>(setup.train.data.eval_memory_bytes));
  checkpoint_fetcher fetcher(dir + "/eval/fetched",
                             checkpoint_bound(setup, model_bytes, dir + "/eval/fetched"));
  checkpoint_follower chief{sys, setup, std::move(find_chief)};
  spdlog::info("evaluator: following the chief's checkpoints at {} (until step {}), evaluating on "
               "{} examples",
               setup.cluster.chief[0].to_string(), setup.train.last_step, test.size());
  if (!chief.follow(setup.runtime.connect_timeout))
    return node::exit_lost_peer;
  std::unique_ptr<event_file> events;
  int64_t evaluated = -1;
  auto last_news = std::chrono::steady_clock::now();
  while (true) {
    auto listing = chief.newest_after(evaluated);
    if (!listing) {
      spdlog::warn("evaluator: lost the chief ({}); looking for it again",
                   describe(listing.error()));
      if (!chief.follow(setup.runtime.recovery_timeout))
        return node::exit_lost_peer;
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
          return node::exit_lost_peer;
      }
      continue;
    }
    if (listing->final) {
      spdlog::info("evaluator: the run is over; evaluated up to step {}; done", evaluated);
      return node::exit_ok;
    }
    if (std::chrono::steady_clock::now() - last_news > idle_limit) {
      spdlog::error(
        "evaluator: no new checkpoint from the chief for {} s (checkpoint.save-interval "
        "+ cluster.recovery-timeout); did training stop?",
        std::chrono::duration_cast<std::chrono::seconds>(idle_limit).count());
      return node::exit_lost_peer;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

} // namespace troupe
