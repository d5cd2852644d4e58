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
#include <spdlog/spdlog.h>

#include "actors/protocol/protocol.hpp"

namespace troupe {

namespace {

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
    // The message keeps the gradients: once the shard let go of it, their
    // storage serves the connection's next push unzeroed.
    auto msg = push.table >= 0
                 ? caf::make_message(push_rows_atom::value, push.run, push.worker, push.step,
                                     push.proof, push.table,
                                     row_keys{std::move(push.keys), std::move(push.counts)},
                                     std::move(push.gradients.at(0)))
                 : caf::make_message(push_atom::value, push.run, push.worker, push.step, push.proof,
                                     push.precision, std::move(push.names),
                                     std::move(push.gradients));
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
    self_->receive([&](int64_t version) { answer.version = version; },
                   [&](caf::error& err) { answer.refused = refusal_of(err); },
                   caf::after(within) >> [] {});
    if (msg->shared())
      return answer;
    if (push.table >= 0)
      push.gradients.assign(1, std::move(msg->get_mutable_as<tensor>(7)));
    else
      push.gradients = std::move(msg->get_mutable_as<std::vector<tensor>>(7));
    return answer;
  }

private:
  caf::scoped_actor self_;
  caf::actor_addr shard_;
  std::deque<std::optional<caf::message>> sent_; // not yet answered; empty: the shard was gone
};

// A pull of rows as the shard answers it over BASP (on_rows): the run's
// check, then the tables' own (table, key count, keys it owns), the
// refusals logged alike. A run that changes between the two checks answers
// a stale worker from the new run's tables; its pushes are refused.
bulk_rows_answer pull_rows_here(const variable_store& store, table_store& tables,
                                traffic_counter& traffic, const std::string& label, uint64_t run,
                                int32_t table, const std::vector<int64_t>& keys) {
  bulk_rows_answer answer;
  answer.answered = true;
  if (auto why = store.other_run(run)) {
    answer.refused = failure{errc::unauthorized, label + " refused a pull of rows: " + *why};
    return answer;
  }
  answer.refused = tables.lookup(table, keys, answer.rows);
  if (answer.refused)
    spdlog::warn("{}: refused a pull of rows: {}", label, answer.refused->message);
  else
    traffic.pulled_rows(keys.size(), answer.rows.bytes());
  return answer;
}

} // namespace

bulk_endpoint shard_endpoint(caf::actor_system& sys, caf::actor_addr shard,
                             const variable_store& store, table_store& tables, snapshot_copy& copy,
                             traffic_counter& traffic, std::string label) {
  bulk_endpoint out;
  out.fetch = [&store, &copy, label](uint64_t run, uint64_t ticket, int32_t index, tensor& value,
                                     int64_t& version) -> maybe_failure {
    auto out = copy.fetch(store, run, label, ticket, index, &version);
    if (auto* err = std::get_if<failure>(&out))
      return *err;
    value = std::move(std::get<tensor>(out));
    return std::nullopt;
  };
  out.pull = [&store, &traffic](uint64_t run, const std::vector<std::string>& names,
                                int32_t precision,
                                std::vector<std::shared_ptr<const tensor>>& pinned,
                                int64_t& version) -> maybe_failure {
    if (auto err = store.pin(run, names, pinned, version, precision))
      return err;
    traffic.pulled(names, pinned);
    return std::nullopt;
  };
  out.open_pusher = [&sys, shard]() -> bulk_endpoint::pusher {
    auto pusher = std::make_shared<connection_pusher>(sys, shard);
    return {[pusher](bulk_push& push) { pusher->hand_over(push); },
            [pusher](bulk_push& push, std::chrono::milliseconds within) {
              return pusher->await(push, within);
            }};
  };
  out.unauthorized_push = [&traffic] { traffic.unauthorized_push(); };
  out.open_row_puller = [&store, &tables, &traffic, label]() -> bulk_endpoint::row_puller {
    return [&store, &tables, &traffic, label](
             uint64_t run, int32_t table, std::vector<int64_t> keys, std::chrono::milliseconds) {
      return pull_rows_here(store, tables, traffic, label, run, table, keys);
    };
  };
  // The wire's bound, as over BASP; the shard's tables refuse past their own.
  out.max_row_keys = [] { return static_cast<int64_t>(max_wire_keys); };
  return out;
}

} // namespace troupe
