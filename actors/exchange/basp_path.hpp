#pragma once
// The message path of a shard_exchange for an actor (a worker, the chief):
// pulls and pushes as requests to the shards' actors, their replies handed
// to the exchange from the actor's own handlers.
#include <chrono>
#include <vector>

#include <caf/error.hpp>

#include "actors/exchange/shard_exchange.hpp"
#include "actors/protocol/protocol.hpp"

namespace troupe {

template <class Self>
class basp_path final : public message_path {
public:
  /// `shards` (the actor's handles, replaced in place when a shard comes
  /// back) must outlive the path.
  basp_path(Self* self, const std::vector<ps_shard_actor>& shards,
            std::chrono::milliseconds timeout)
    : self_(self), shards_(shards), timeout_(timeout) {}

  void pull(int32_t shard, uint64_t run, const std::vector<std::string>& names,
            wire_precision precision, pull_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, pull_atom::value, run, names,
                static_cast<int32_t>(precision))
      .then([done](pull_reply& reply) { done(reply.values, std::nullopt, std::nullopt); },
            [done](caf::error& err) { failed(done, err); });
  }

  void push(int32_t shard, const push_header& h, const std::vector<std::string>& names,
            std::vector<tensor> gradients, push_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, push_atom::value, h.run, h.worker,
                h.step, h.proof, push_wire_code(h), names, std::move(gradients))
      .then([done](int64_t) { done(std::nullopt, std::nullopt); },
            [done](caf::error& err) {
              auto refused = refusal_of(err);
              done(refused, refused ? std::nullopt : std::optional<std::string>{describe(err)});
            });
  }

  void fetch(int32_t shard, uint64_t run, const copy_tensor& copy, pull_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, fetch_atom::value, run,
                copy.ticket, copy.index)
      .then(
        [done](tensor& value) {
          std::vector<tensor> values;
          values.push_back(std::move(value));
          done(values, std::nullopt, std::nullopt);
        },
        [done](caf::error& err) { failed(done, err); });
  }

  void pull_rows(int32_t shard, uint64_t run, int32_t table, std::vector<int64_t> keys,
                 pull_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, rows_atom::value, run, table,
                row_keys{std::move(keys), {}})
      .then(
        [done](tensor& rows) {
          std::vector<tensor> values;
          values.push_back(std::move(rows));
          done(values, std::nullopt, std::nullopt);
        },
        [done](caf::error& err) { failed(done, err); });
  }

  void push_rows(int32_t shard, const push_header& h, int32_t table, std::vector<int64_t> keys,
                 std::vector<uint32_t> counts, tensor grads, push_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, push_rows_atom::value, h.run,
                h.worker, h.step, h.proof, table, row_keys{std::move(keys), std::move(counts)},
                std::move(grads))
      .then([done](int64_t) { done(std::nullopt, std::nullopt); },
            [done](caf::error& err) {
              auto refused = refusal_of(err);
              done(refused, refused ? std::nullopt : std::optional<std::string>{describe(err)});
            });
  }

private:
  static void failed(const pull_done& done, const caf::error& err) {
    std::vector<tensor> none;
    auto refused = refusal_of(err);
    done(none, refused, refused ? std::nullopt : std::optional<std::string>{describe(err)});
  }

  Self* self_;
  const std::vector<ps_shard_actor>& shards_;
  std::chrono::milliseconds timeout_;
};

} // namespace troupe
