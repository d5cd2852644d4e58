#pragma once
// The message path of a shard_exchange for an actor (a worker, the chief):
// pulls, pushes and fetches as requests to the shards' actors, their
// replies handed to the exchange from the actor's own handlers.
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

  void pull(int32_t shard, pull_request request, pull_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, pull_atom::value,
                std::move(request))
      .then([done](pull_reply& reply) { done(reply, std::nullopt, std::nullopt); },
            [done](caf::error& err) { failed(done, err); });
  }

  void push(int32_t shard, step_push push, push_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, push_atom::value, std::move(push))
      .then([done](const push_receipt& answer) { done(answer, std::nullopt, std::nullopt); },
            [done](caf::error& err) {
              auto refused = refusal_of(err);
              done({}, refused, refused ? std::nullopt : std::optional<std::string>{describe(err)});
            });
  }

  void fetch(int32_t shard, uint64_t run, const copy_tensor& copy, pull_done done) override {
    self_
      ->request(shards_.at(static_cast<size_t>(shard)), timeout_, fetch_atom::value, run,
                copy.ticket, copy.index)
      .then(
        [done](tensor& value) {
          pull_reply reply;
          reply.values.push_back(std::move(value));
          done(reply, std::nullopt, std::nullopt);
        },
        [done](caf::error& err) { failed(done, err); });
  }

private:
  static void failed(const pull_done& done, const caf::error& err) {
    pull_reply none;
    auto refused = refusal_of(err);
    done(none, refused, refused ? std::nullopt : std::optional<std::string>{describe(err)});
  }

  Self* self_;
  const std::vector<ps_shard_actor>& shards_;
  std::chrono::milliseconds timeout_;
};

} // namespace troupe
