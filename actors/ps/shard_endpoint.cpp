#include "actors/ps/shard_endpoint.hpp"

#include <deque>
#include <memory>
#include <optional>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/after.hpp>
#include <caf/make_message.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/protocol/protocol.hpp"

namespace troupe {

namespace {

// A push read off a connection as the message a BASP peer sends: its
// tensors move in, and come back once the shard let go of them.
step_push push_message(bulk_push& push) {
  step_push out{push.run,
                push.worker,
                push.step,
                push.proof,
                push.precision,
                std::move(push.names),
                std::move(push.gradients),
                {}};
  for (auto& rows : push.tables)
    out.tables.push_back(
      {rows.table, std::move(rows.keys), std::move(rows.counts), std::move(rows.gradients)});
  return out;
}

void take_back(step_push& message, bulk_push& push) {
  push.gradients = std::move(message.gradients);
  for (size_t t = 0; t < push.tables.size() && t < message.tables.size(); ++t)
    push.tables[t].gradients = std::move(message.tables[t].grads);
}

// One connection's pushes, through a blocking actor of its own: each
// handed over as the message a BASP peer sends, the answers awaited in the
// order sent (the shard answers every push at once, in its mailbox's order).
class connection_pusher {
public:
  connection_pusher(caf::actor_system& sys, caf::actor_addr shard) : self_(sys), shard_(shard) {}

  void hand_over(bulk_push& push) {
    auto shard = caf::actor_cast<caf::actor>(caf::actor_cast<caf::strong_actor_ptr>(shard_));
    if (!shard) {
      sent_.emplace_back(); // no answer will come
      return;
    }
    auto msg = caf::make_message(push_atom::value, push_message(push));
    // Sent, not requested: the shard's answer comes back as an ordinary
    // message, and the wait is the mailbox's own. A request with a timeout
    // would leave a timer per push that CAF never cancels for a blocking
    // actor: each fired timeout stayed in this long-lived actor's mailbox,
    // and every receive scanned them all (a ps spent 80% of its time there
    // after a minute of training). After a missing answer the connection
    // closes, so a late one matches nothing.
    self_->send(shard, msg);
    sent_.emplace_back(std::move(msg));
  }

  bulk_push_answer await(bulk_push& push, std::chrono::milliseconds within) {
    bulk_push_answer answer;
    if (sent_.empty())
      return answer;
    auto msg = std::move(sent_.front());
    sent_.pop_front();
    if (!msg)
      return answer;
    self_->receive(
      [&](push_receipt& r) {
        answer.version = r.version;
        answer.receipt = r.receipt;
      },
      [&](caf::error& err) { answer.refused = refusal_of(err); }, caf::after(within) >> [] {});
    if (!msg->shared())
      take_back(msg->get_mutable_as<step_push>(1), push);
    return answer;
  }

private:
  caf::scoped_actor self_;
  caf::actor_addr shard_;
  std::deque<std::optional<caf::message>> sent_; // not yet answered; empty: the shard was gone
};

} // namespace

bulk_endpoint shard_endpoint(caf::actor_system& sys, caf::actor_addr shard,
                             shard_service& service) {
  bulk_endpoint out;
  out.fetch = [&service](uint64_t run, uint64_t ticket, int32_t index, tensor& value,
                         int64_t& version) -> maybe_failure {
    auto got = service.fetch(run, ticket, index, &version);
    if (auto* err = std::get_if<failure>(&got))
      return *err;
    value = std::move(std::get<tensor>(got));
    return std::nullopt;
  };
  out.pull = [&service](bulk_pull& pull, bulk_pulled& answer) -> maybe_failure {
    pull_request request{pull.run, std::move(pull.names), pull.precision, {}};
    for (auto& rows : pull.tables)
      request.tables.push_back({rows.table, std::move(rows.keys)});
    pulled got;
    if (auto err = service.pull(request, got))
      return err;
    answer.version = got.version;
    answer.values = std::move(got.values);
    answer.rows = std::move(got.rows);
    return std::nullopt;
  };
  out.open_pusher = [&sys, shard]() -> bulk_endpoint::pusher {
    auto pusher = std::make_shared<connection_pusher>(sys, shard);
    return {[pusher](bulk_push& push) { pusher->hand_over(push); },
            [pusher](bulk_push& push, std::chrono::milliseconds within) {
              return pusher->await(push, within);
            }};
  };
  out.unauthorized_push = [&service] { service.unauthorized_push(); };
  // The wire's bound, as over BASP; the shard's tables refuse past their own.
  out.max_row_keys = static_cast<int64_t>(max_wire_keys);
  return out;
}

} // namespace troupe
