#pragma once
// The shards' side of a fake message path: every pull and push kept, with
// its shard and its callback, until the test answers it, as replies wait
// in a mailbox. Tests derive from it to answer in their own way.
#include <string>
#include <vector>

#include "actors/exchange/shard_exchange.hpp"

namespace troupe::testing {

struct held_requests : message_path {
  struct held_pull {
    int32_t shard;
    pull_request request;
    pull_done done;
  };
  struct held_push {
    int32_t shard;
    step_push push;
    push_done done;
  };
  std::vector<held_pull> pulls;
  std::vector<held_push> pushes;
  std::vector<std::string> sent; ///< "pull:S", "push:S", in the order asked

  void pull(int32_t shard, pull_request request, pull_done done) override {
    sent.push_back("pull:" + std::to_string(shard));
    pulls.push_back({shard, std::move(request), std::move(done)});
  }
  void push(int32_t shard, step_push push, push_done done) override {
    sent.push_back("push:" + std::to_string(shard));
    pushes.push_back({shard, std::move(push), std::move(done)});
  }
  void fetch(int32_t, uint64_t, const copy_tensor&, pull_done) override {}
};

} // namespace troupe::testing
