// The shard actor's embedding rows (rows, push_rows) on CAF's
// test_coordinator: pulls of unseen keys, async pushes, a hostile oversized
// request refused while the shard goes on, and sync steps that complete on
// rows alone on a shard without dense variables.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <cstring>

#include "actors/ps/ps_shard.hpp"
#include "tests/support/actors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

table_setup small_table() {
  table_setup s;
  s.table.name = "embedding";
  s.table.dim = 2;
  s.table.init = {row_initializer::uniform, 0.5, 1};
  s.table.optimizer.kind = sparse_optimizer_kind::sgd;
  s.table.optimizer.learning_rate = 1.0;
  s.table.buckets = {16, 0};
  s.max_keys = 1000;
  return s;
}

using names = std::vector<std::string>;

// A shard initialised for test_run with one variable, "bias", and
// small_table().
struct table_shard_fixture : deterministic_fixture {
  auto shard_with_table() {
    auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
    sched.run();
    shard_options options;
    options.tables = {small_table()};
    BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"bias"},
                                    std::vector<tensor>{tensor({1}, 0.0f)}, options));
    return s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ps_shard_rows, table_shard_fixture)

BOOST_AUTO_TEST_CASE(rows_read_initial_values_and_pushes_apply_at_once) {
  auto s = shard_with_table();
  auto first = ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{{3, 8}, {}});
  BOOST_REQUIRE(first);
  BOOST_TEST(first->shape() == (shape_t{2, 2}));
  auto version = ask<int64_t>(s, push_rows_atom::value, test_run, int32_t{0}, int64_t{0},
                              uint64_t{0}, int32_t{0}, row_keys{{3}, {1}}, tensor({1, 2}, 0.25f));
  BOOST_REQUIRE(version);
  auto after = ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{{3, 8}, {}});
  BOOST_REQUIRE(after);
  BOOST_TEST((*after)[0] == (*first)[0] - 0.25f);
  BOOST_TEST((*after)[2] == (*first)[2]); // key 8 untouched

  // Another run's pull is refused; so is one above max-keys, and the shard
  // answers the next one.
  auto stranger = ask<tensor>(s, rows_atom::value, run_id{99}, int32_t{0}, row_keys{{3}, {}});
  BOOST_TEST(is(stranger.error(), errc::unauthorized));
  std::vector<int64_t> many(1001);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = static_cast<int64_t>(i);
  auto big = ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{many, {}});
  BOOST_REQUIRE(!big);
  BOOST_TEST(is(big.error(), errc::invalid_request));
  BOOST_TEST(describe(big.error()).find("max-keys-per-request") != std::string::npos);
  BOOST_TEST(
    static_cast<bool>(ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{{3}, {}})));
  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_REQUIRE(stats);
  BOOST_REQUIRE(stats->tables.size() == 1u);
  BOOST_TEST(stats->tables[0].rows == 1u);
  BOOST_TEST(stats->keys_pushed == 1u);
}

// A checkpoint's copy of a table is a frozen view: pushes after the
// snapshot, to a saved row and to a new one, do not reach the fetched file.
BOOST_AUTO_TEST_CASE(a_snapshots_rows_are_those_of_its_version_whatever_is_pushed_after) {
  auto s = shard_with_table();
  auto push = [&](int64_t key) {
    return ask<int64_t>(s, push_rows_atom::value, test_run, int32_t{0}, int64_t{0}, uint64_t{0},
                        int32_t{0}, row_keys{{key}, {1}}, tensor({1, 2}, 0.25f));
  };
  auto version = push(3);
  BOOST_REQUIRE(version);
  auto saved = ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{{3}, {}});
  auto index = ask<snapshot_index>(s, snapshot_atom::value, test_run, *version);
  BOOST_REQUIRE(index);
  BOOST_REQUIRE(push(3));
  BOOST_REQUIRE(push(8));
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
  auto now = ask<tensor>(s, rows_atom::value, test_run, int32_t{0}, row_keys{{3}, {}});
  BOOST_TEST((*now)[0] == (*saved)[0] - 0.25f);
}

BOOST_AUTO_TEST_CASE(a_sync_shard_without_variables_completes_steps_on_rows) {
  auto log = std::make_shared<std::vector<applied_event>>();
  token_queue_actor queue = sys.spawn(spy_queue, log);
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  shard_options options;
  options.sync = true;
  options.replicas_to_aggregate = 2;
  options.last_step = 10;
  options.token_queue = queue;
  options.tables = {small_table()};
  BOOST_REQUIRE(
    ask<caf::ok_atom>(s, init_atom::value, test_run, names{}, std::vector<tensor>{}, options));
  auto push = [&](int32_t worker, row_keys keys, float g) {
    auto n = static_cast<int64_t>(keys.keys.size());
    return ask<int64_t>(s, push_rows_atom::value, test_run, worker, int64_t{0}, uint64_t{0},
                        int32_t{0}, std::move(keys), tensor({n, 2}, g));
  };
  BOOST_REQUIRE(push(0, {{3}, {1}}, 1.0f));
  BOOST_TEST(log->empty());
  BOOST_REQUIRE(push(1, {{}, {}}, 0.0f)); // touched no key here: an empty push
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->back().step == 1);
  auto late = push(2, {{3}, {1}}, 1.0f);
  BOOST_TEST(is(late.error(), errc::stale_gradient));
}

BOOST_AUTO_TEST_SUITE_END()
