// The shard actor's embedding rows on CAF's test_coordinator: pulls of
// unseen keys, a step's rows and dense gradients taken together and once
// (a replay moves nothing, issue 52), a refused push that changes nothing,
// a hostile oversized request refused while the shard goes on, a
// snapshot's frozen rows, and sync steps that complete on rows alone on a
// shard without dense variables.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <cstring>

#include "actors/protocol/grant_proof.hpp"
#include "actors/ps/ps_shard.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/tables.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

table_setup small_table() {
  return sgd_table_setup(2, {row_initializer::uniform, 0.5, 1}, {16, 0}, 1000);
}

using names = std::vector<std::string>;

step_rows step_rows_of(std::vector<int64_t> keys, float g) {
  auto n = static_cast<int64_t>(keys.size());
  std::vector<uint32_t> counts(keys.size(), 1);
  return {0, std::move(keys), std::move(counts), tensor({n, 2}, g)};
}

// A shard initialised for test_run with one variable, "bias", and
// small_table() (signed with `key` where it is not empty).
struct table_shard_fixture : deterministic_fixture {
  auto shard_with_table(grant_key key = {}) {
    auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
    sched.run();
    shard_options options;
    options.tables = {small_table()};
    options.grant_key0 = key.k0;
    options.grant_key1 = key.k1;
    BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"bias"},
                                    std::vector<tensor>{tensor({1}, 0.0f)}, options));
    return s;
  }
  caf::expected<tensor> rows(const ps_shard_actor& s, std::vector<int64_t> keys,
                             run_id run = test_run) {
    auto reply = pull(s, run, {}, 0, {{0, std::move(keys)}});
    if (!reply)
      return reply.error();
    return std::move(reply->rows.at(0));
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ps_shard_rows, table_shard_fixture)

BOOST_AUTO_TEST_CASE(rows_read_initial_values_and_pushes_apply_at_once) {
  auto s = shard_with_table();
  auto first = rows(s, {3, 8});
  BOOST_REQUIRE(first);
  BOOST_TEST(first->shape() == (shape_t{2, 2}));
  auto version = push(s, test_run, 0, 0, 0, 0, names{"bias"}, {tensor({1}, 0.0f)},
                      {step_rows_of({3}, 0.25f)});
  BOOST_REQUIRE(version);
  auto after = rows(s, {3, 8});
  BOOST_REQUIRE(after);
  BOOST_TEST((*after)[0] == (*first)[0] - 0.25f);
  BOOST_TEST((*after)[2] == (*first)[2]); // key 8 untouched

  // Another run's pull is refused; so is one above max-keys, and the shard
  // answers the next one.
  auto stranger = rows(s, {3}, run_id{99});
  BOOST_TEST(is(stranger.error(), errc::unauthorized));
  std::vector<int64_t> many(1001);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = static_cast<int64_t>(i);
  auto big = rows(s, many);
  BOOST_REQUIRE(!big);
  BOOST_TEST(is(big.error(), errc::invalid_request));
  BOOST_TEST(describe(big.error()).find("max-keys-per-request") != std::string::npos);
  BOOST_TEST(static_cast<bool>(rows(s, {3})));
  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_REQUIRE(stats);
  BOOST_REQUIRE(stats->tables.size() == 1u);
  BOOST_TEST(stats->tables[0].rows == 1u);
  BOOST_TEST(stats->keys_pushed == 1u);
}

// Issue 52: a worker pushed one step's rows five times (and once more after
// the step was reported), or a forger replayed a captured push 50 times,
// and the rows moved each time. A step is taken once: its replays move
// neither rows nor dense values, each is answered with the same receipt,
// and they are counted.
BOOST_AUTO_TEST_CASE(a_steps_rows_are_applied_once_whoever_replays_them) {
  auto key = grant_key::draw();
  auto s = shard_with_table(key);
  auto before = rows(s, {3});
  BOOST_REQUIRE(before);
  step_push captured{test_run,
                     0,
                     7,
                     grant_proof(key, test_run, 0, 7),
                     0,
                     names{"bias"},
                     {tensor({1}, 1.0f)},
                     {step_rows_of({3}, 0.25f)}};
  auto first = push_receipt_of(s, captured);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->receipt == step_receipt(key, test_run, 0, 7, 0));
  auto once = rows(s, {3});
  BOOST_TEST((*once)[0] == (*before)[0] - 0.25f);
  for (int replay = 0; replay < 50; ++replay) {
    auto again = push_receipt_of(s, captured);
    BOOST_REQUIRE(again);
    BOOST_TEST(again->version == first->version);
    BOOST_TEST(again->receipt == first->receipt);
  }
  BOOST_TEST(rows(s, {3})->bit_equal(*once));
  BOOST_TEST(pull(s, test_run, {"bias"})->values[0][0] == -0.5f); // one step of SGD at 0.5
  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_REQUIRE(stats);
  BOOST_TEST(stats->updates == 1);
  BOOST_TEST(stats->repeated_pushes == 50u);
  BOOST_TEST(stats->unauthorized_pushes == 0u);
}

// A push is taken whole or refused whole: rows that do not fit (a key of
// another shard, a key twice) leave the dense values unchanged too, and
// the worker hears the refusal (it reports the step not applied).
BOOST_AUTO_TEST_CASE(a_push_whose_rows_do_not_fit_changes_nothing) {
  auto s = shard_with_table();
  auto twice = step_rows_of({3, 3}, 0.25f);
  auto refused = push(s, test_run, 0, 0, 0, 0, names{"bias"}, {tensor({1}, 1.0f)}, {twice});
  BOOST_REQUIRE(!refused);
  BOOST_TEST(is(refused.error(), errc::invalid_request));
  BOOST_TEST(describe(refused.error()).find("twice") != std::string::npos);
  BOOST_TEST(pull(s, test_run, {"bias"})->values[0][0] == 0.0f);
  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_TEST(stats->updates == 0);
  BOOST_TEST(stats->tables[0].rows == 0u);
  // The same step, pushed right, is taken.
  BOOST_TEST(static_cast<bool>(
    push(s, test_run, 0, 0, 0, 0, names{"bias"}, {tensor({1}, 1.0f)}, {step_rows_of({3}, 0.25f)})));
}

// A checkpoint's copy of a table is a frozen view: pushes after the
// snapshot, to a saved row and to a new one, do not reach the fetched file.
BOOST_AUTO_TEST_CASE(a_snapshots_rows_are_those_of_its_version_whatever_is_pushed_after) {
  auto s = shard_with_table();
  int64_t step = 0;
  auto push_key = [&](int64_t key) {
    return push(s, test_run, 0, step++, 0, 0, names{"bias"}, {tensor({1}, 0.0f)},
                {step_rows_of({key}, 0.25f)});
  };
  auto version = push_key(3);
  BOOST_REQUIRE(version);
  auto saved = rows(s, {3});
  auto index = ask<snapshot_index>(s, snapshot_atom::value, test_run, *version);
  BOOST_REQUIRE(index);
  BOOST_REQUIRE(push_key(3));
  BOOST_REQUIRE(push_key(8));
  auto at = [&](const std::string& name) {
    auto it = std::find(index->names.begin(), index->names.end(), name);
    BOOST_REQUIRE(it != index->names.end());
    return static_cast<int32_t>(it - index->names.begin());
  };
  auto keys = ask<tensor>(s, fetch_atom::value, test_run, index->ticket, at("emb/embedding/keys"));
  auto values = ask<tensor>(s, fetch_atom::value, test_run, index->ticket,
                            at("emb/embedding/values"));
  BOOST_REQUIRE(keys);
  BOOST_REQUIRE(values);
  BOOST_REQUIRE(keys->size() == 2u); // one I64 key, in the floats that hold its bytes
  int64_t key;
  std::memcpy(&key, keys->data(), sizeof key);
  BOOST_TEST(key == 3);
  BOOST_TEST(values->shape() == (shape_t{1, 2}));
  BOOST_TEST((*values)[0] == (*saved)[0]); // not the second push's value
  auto now = rows(s, {3});
  BOOST_TEST((*now)[0] == (*saved)[0] - 0.25f);
}

BOOST_AUTO_TEST_CASE(a_sync_shard_without_variables_completes_steps_on_rows) {
  auto log = std::make_shared<std::vector<applied_event>>();
  token_queue_actor queue = sys.spawn(spy_queue, log);
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto options = sync_shard_options(queue);
  options.tables = {small_table()};
  BOOST_REQUIRE(
    ask<caf::ok_atom>(s, init_atom::value, test_run, names{}, std::vector<tensor>{}, options));
  auto push_rows = [&](int32_t worker, std::vector<int64_t> keys, float g) {
    return push(s, test_run, worker, 0, 0, 0, names{}, {}, {step_rows_of(std::move(keys), g)});
  };
  BOOST_REQUIRE(push_rows(0, {3}, 1.0f));
  BOOST_TEST(log->empty());
  BOOST_REQUIRE(push_rows(1, {}, 0.0f)); // touched no key here: an empty push
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->back().step == 1);
  auto late = push_rows(2, {3}, 1.0f);
  BOOST_TEST(is(late.error(), errc::stale_gradient));
}

BOOST_AUTO_TEST_SUITE_END()
