// Reading every variable's current value (the final values, and those of
// each evaluation): from shards in other processes on their bulk path (the
// shard writes its values from where they are: no copy, and no message
// buffer that a connection keeps for its life), over BASP from the others,
// and over BASP again for any part the bulk path failed to bring.
#include <caf/blocking_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/chief/chief_run.hpp"
#include "actors/common/fan_in.hpp"
#include "actors/net/bulk_client.hpp"

namespace troupe::chief_run {

namespace {

// One read under way: the values gathered so far, and how it ends.
struct value_read {
  std::vector<tensor> params;
  std::shared_ptr<fan_in> join;
  bool settled = false; // the first failure ends it
  std::function<void(const std::string&)> failed;
  void fail(const std::string& why) {
    if (settled)
      return;
    settled = true;
    failed(why);
  }
};

void gather(self_ptr self, value_read& read, const slice_router::shard_part& part,
            std::vector<tensor>&& values) {
  try {
    self->state.router->gather(part, std::move(values), read.params);
  } catch (const std::exception& e) {
    read.fail(e.what());
    return;
  }
  read.join->arrive();
}

void read_over_basp(self_ptr self, std::shared_ptr<value_read> read,
                    const slice_router::shard_part& part) {
  auto& st = self->state;
  self
    ->request(st.links.shards[static_cast<size_t>(part.shard)], st.config.runtime.request_timeout,
              pull_atom::value, st.run, part.names)
    .then(
      [self, read, part](pull_reply& reply) { gather(self, *read, part, std::move(reply.values)); },
      [read, shard = part.shard](caf::error& err) {
        read->fail("ps:" + std::to_string(shard) + " did not answer: " + describe(err));
      });
}

bool over_bulk(self_ptr self, int32_t shard) {
  auto& st = self->state;
  auto s = static_cast<size_t>(shard);
  return st.links.bulk.shard_hosts.size() == st.links.shards.size()
         && st.links.shards[s].node() != self->node();
}

// The parts on the bulk path: each shard's port and ticket asked over BASP,
// then one blocking read on a helper thread of its own.
void read_over_bulk(self_ptr self, std::shared_ptr<value_read> read,
                    std::vector<slice_router::shard_part> parts) {
  auto& st = self->state;
  auto reads = std::make_shared<std::vector<bulk_read>>(parts.size());
  auto on_failure = [self, read, parts](const std::string& why) {
    spdlog::warn("chief: reading values on the bulk path failed ({}); reading them over the "
                 "control connection",
                 why);
    for (auto& part : parts)
      read_over_basp(self, read, part);
  };
  auto asked = make_fan_in(parts.size(), [self, read, parts, reads, on_failure] {
    // A shard without a bulk path (port 0) is read over BASP.
    for (auto& r : *reads)
      if (r.port == 0) {
        on_failure("a shard offers none");
        return;
      }
    auto& st = self->state;
    auto within = st.config.runtime.request_timeout;
    auto run = st.run;
    auto tls = st.links.bulk.tls;
    auto reader = self->spawn<caf::detached>(
      [reads, run, within, tls](caf::event_based_actor* me) -> caf::behavior {
        return {[me, reads, run, within, tls](caf::get_atom) -> caf::result<caf::ok_atom> {
          me->quit();
          if (auto err = read_once(*reads, run, "chief", within, tls.get()))
            return make_error(*err);
          return caf::ok_atom::value;
        }};
      });
    self->request(reader, within * 2, caf::get_atom::value)
      .then(
        [self, read, parts, reads](caf::ok_atom) {
          for (size_t i = 0; i < parts.size(); ++i)
            gather(self, *read, parts[i], std::move((*reads)[i].values));
        },
        [on_failure](caf::error& err) { on_failure(describe(err)); });
  });
  for (size_t i = 0; i < parts.size(); ++i)
    self
      ->request(st.links.shards[static_cast<size_t>(parts[i].shard)],
                st.config.runtime.request_timeout, bulk_atom::value, st.run, int32_t{-1})
      .then(
        [self, reads, i, part = parts[i], asked](uint16_t port, uint64_t ticket) {
          auto& r = (*reads)[i];
          r.host = self->state.links.bulk.shard_hosts[static_cast<size_t>(part.shard)];
          r.port = port;
          r.ticket = ticket;
          r.names = part.names;
          asked->arrive();
        },
        [read, shard = parts[i].shard](caf::error& err) {
          read->fail("ps:" + std::to_string(shard) + " did not answer: " + describe(err));
        });
}

} // namespace

void read_values(self_ptr self, std::function<void(std::vector<tensor>)> done,
                 std::function<void(const std::string&)> failed) {
  auto& st = self->state;
  auto read = std::make_shared<value_read>();
  for (auto& v : st.links.net->variables())
    read->params.emplace_back(v.shape);
  read->failed = std::move(failed);
  read->join = make_fan_in(st.router->parts().size(), [read, done] {
    if (!read->settled)
      done(std::move(read->params));
  });
  std::vector<slice_router::shard_part> bulk;
  for (auto& part : st.router->parts())
    if (over_bulk(self, part.shard))
      bulk.push_back(part);
    else
      read_over_basp(self, read, part);
  if (!bulk.empty())
    read_over_bulk(self, read, std::move(bulk));
}

} // namespace troupe::chief_run
