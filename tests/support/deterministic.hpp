#pragma once
// A Boost.Test fixture over CAF's test_coordinator: no scheduler threads,
// every message delivered one at a time when the test says so.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/protocol/protocol.hpp"

namespace troupe::testing {

struct deterministic_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  /// Asks on behalf of the test; lives as long as the fixture, because a shard
  /// follows the actor that initialised it (its chief) down.
  caf::scoped_actor self;

  static caf::actor_system_config& prepare(caf::actor_system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    c.set("logger.inline-output", true);
    register_protocol(c);
    return c;
  }

  deterministic_fixture()
    : sys(prepare(cfg)), sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
      self(sys) {}

  ~deterministic_fixture() { sched.run(); }

  /// A pull of `names` (and each table's rows), answered with the reply.
  caf::expected<pull_reply> pull(const ps_shard_actor& shard, run_id run,
                                 std::vector<std::string> names, int32_t precision = 0,
                                 std::vector<table_keys> tables = {}) {
    return ask<pull_reply>(shard, pull_atom::value,
                           pull_request{run, std::move(names), precision, std::move(tables)});
  }

  /// One step's push of dense gradients (and rows), answered with the
  /// shard's version after it (its receipt: push_receipt_of).
  caf::expected<int64_t> push(const ps_shard_actor& shard, run_id run, int32_t worker, int64_t step,
                              uint64_t proof, int32_t precision, std::vector<std::string> names,
                              std::vector<tensor> gradients, std::vector<step_rows> tables = {}) {
    auto answer = push_receipt_of(shard, {run, worker, step, proof, precision, std::move(names),
                                          std::move(gradients), std::move(tables)});
    if (!answer)
      return answer.error();
    return answer->version;
  }

  caf::expected<push_receipt> push_receipt_of(const ps_shard_actor& shard, step_push push) {
    return ask<push_receipt>(shard, push_atom::value, std::move(push));
  }

  /// Sends a request from a scoped actor, runs every actor until idle, and
  /// returns the reply (or the error it was answered with).
  template <class T, class Handle, class... Ts>
  caf::expected<T> ask(const Handle& dest, Ts&&... xs) {
    auto handle = self->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    caf::expected<T> out{caf::sec::request_timeout};
    handle.receive([&](T& x) { out = std::move(x); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }
};

/// True when err is the Troupe error `code`.
inline bool is(const caf::error& err, errc code) {
  return err.category() == caf::atom("troupe") && err.code() == static_cast<uint8_t>(code);
}

} // namespace troupe::testing
