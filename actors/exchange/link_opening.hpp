#pragma once
// Opening an exchange's bulk links, for an actor (a worker, the chief's
// reader): every shard in another process that offers a bulk path is asked
// for its port and a ticket over BASP, then connected from here. A shard
// that cannot be reached that way stays on BASP; one whose answer failed
// is the caller's to handle. Connecting blocks: the actor is detached.
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <spdlog/spdlog.h>

#include "actors/common/fan_in.hpp"
#include "actors/exchange/shard_exchange.hpp"
#include "actors/protocol/protocol.hpp"

namespace troupe {

/// Who asks and what for: `index` is a worker's (its pushes) or -1 (pulls only).
struct link_request {
  uint64_t run = 0;
  int32_t index = -1;
  std::string label; ///< "worker:0", "chief": for log lines and the server's
  std::chrono::milliseconds timeout{30000};
};

/// Resets `exchange`'s links, then opens one to each shard that offers it.
/// `opened` runs once every shard answered; `failed` for a shard whose answer
/// failed; `current` false drops an answer that came too late (a new plan).
template <class Self>
void open_bulk_links(Self* self, shard_exchange& exchange,
                     const std::vector<ps_shard_actor>& shards, const bulk_peers& peers,
                     const link_request& req, std::function<bool()> current,
                     std::function<void()> opened,
                     std::function<void(size_t shard, const caf::error&)> failed) {
  exchange.reset_links(shards.size());
  std::vector<size_t> remote;
  if (peers.shard_hosts.size() == shards.size())
    for (size_t s = 0; s < shards.size(); ++s)
      if (shards[s].node() != self->node())
        remote.push_back(s);
  auto join = make_fan_in(remote.size(), std::move(opened));
  for (auto s : remote)
    self->request(shards[s], req.timeout, bulk_atom::value, req.run, req.index)
      .then(
        [&exchange, &peers, req, join, s, current](uint16_t port, uint64_t ticket) {
          if (!current())
            return;
          if (port != 0) {
            maybe_failure error;
            auto within = std::min<std::chrono::milliseconds>(req.timeout,
                                                              std::chrono::seconds(10));
            auto link = bulk_link::open(peers.shard_hosts[s], port, req.run, ticket, req.label,
                                        std::chrono::steady_clock::now() + within, error,
                                        peers.tls.get());
            if (error)
              spdlog::warn("{}: no bulk path to ps:{} ({}); pulling and pushing over the control "
                           "connection",
                           req.label, s, error->message);
            else
              exchange.set_link(static_cast<int32_t>(s), std::move(link));
          }
          join->arrive();
        },
        [s, current, failed](caf::error& err) {
          if (current())
            failed(s, err);
        });
}

} // namespace troupe
