#include "actors/chief/value_reader.hpp"

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/exchange/basp_path.hpp"
#include "actors/exchange/link_opening.hpp"

namespace troupe {

namespace {

// One read: the exchange and its message path live as long as the actor.
struct reading {
  reading(caf::event_based_actor* self, value_read_job j, std::shared_ptr<value_read_result> v)
    : job(std::move(j)), into(std::move(v)), basp(self, job.shards, job.timeout),
      exchange(basp, job.timeout) {}

  value_read_job job;
  std::shared_ptr<value_read_result> into;
  caf::response_promise answer;
  basp_path<caf::event_based_actor> basp;
  shard_exchange exchange;
};

void end(caf::event_based_actor* self, reading& r, std::string error = {}) {
  r.into->error = std::move(error);
  r.answer.deliver(caf::ok_atom::value);
  self->quit();
}

// Pulls every part; a part the bulk path failed to bring (refused, or its
// link broke and was dropped) is read again over BASP, every part on links
// reset, once.
void pull(caf::event_based_actor* self, std::shared_ptr<reading> r) {
  std::vector<exchange_part> parts;
  std::vector<bool> over_bulk; // per part, decided before the exchange may drop a link
  for (auto& part : r->job.parts) {
    exchange_part p;
    p.shard = part.shard;
    p.names = &part.names;
    parts.push_back(std::move(p));
    over_bulk.push_back(r->exchange.has_link(part.shard));
  }
  r->exchange.start(exchange_kind::pull, push_header{r->job.run}, std::move(parts), false);
  r->exchange.finish([self, r, over_bulk](std::vector<part_outcome>& outcomes) {
    for (size_t i = 0; i < outcomes.size(); ++i) {
      auto& out = outcomes[i];
      auto shard = r->job.parts[i].shard;
      if (!out.lost && !out.refused) {
        r->into->values[i] = std::move(out.values);
        continue;
      }
      auto why = out.lost ? *out.lost : out.refused->message;
      if (over_bulk[i]) {
        spdlog::warn("chief: reading values on the bulk path failed (ps:{}: {}); reading them "
                     "over the control connection",
                     shard, why);
        r->exchange.reset_links(r->job.shards.size()); // no links: the retry is BASP only
        pull(self, r);
        return;
      }
      end(self, *r, "ps:" + std::to_string(shard) + " did not answer: " + why);
      return;
    }
    end(self, *r);
  });
}

} // namespace

caf::behavior value_reader(caf::event_based_actor* self, value_read_job job,
                           std::shared_ptr<value_read_result> into) {
  into->values.assign(job.parts.size(), {});
  auto r = std::make_shared<reading>(self, std::move(job), std::move(into));
  return {[self, r](caf::get_atom) {
    r->answer = self->make_response_promise();
    open_bulk_links(
      self, r->exchange, r->job.shards, r->job.bulk, {r->job.run, -1, "chief", r->job.timeout},
      [] { return true; }, [self, r] { pull(self, r); },
      [self, r](size_t s, const caf::error& err) {
        end(self, *r, "ps:" + std::to_string(s) + " did not answer: " + describe(err));
      });
    return r->answer;
  }};
}

} // namespace troupe
