// A step's embedding rows with the shards (actors/exchange/row_exchange.hpp),
// through a shard_exchange over a fake message path (no bulk links): each
// shard asked only for the keys whose bucket it owns, sorted by bucket;
// replies scattered back to their keys in any order; pushes to every
// shard; rows riding in the one pull and the one push of a step's part; a
// wrong shape and a loss surfacing; a cancelled exchange ignoring late
// replies.
#include <algorithm>
#include <map>

#include <boost/test/unit_test.hpp>

#include "actors/exchange/row_exchange.hpp"
#include "tests/support/held_requests.hpp"

using namespace troupe;

namespace {

// The shards' side of a fake message path: every request kept, answered
// when the test says.
struct fake_rows : troupe::testing::held_requests {
  // Answers pull i with each key's row [key, key] (dim 2), and any dense
  // value it asked as 3.
  void answer(size_t i) {
    auto& p = pulls.at(i);
    pull_reply reply;
    for (size_t n = 0; n < p.request.names.size(); ++n)
      reply.values.push_back(tensor({1}, 3.0f));
    for (auto& table : p.request.tables) {
      tensor rows({static_cast<int64_t>(table.keys.size()), 2});
      for (size_t k = 0; k < table.keys.size(); ++k)
        rows.data()[2 * k] = rows.data()[2 * k + 1] = static_cast<float>(table.keys[k]);
      reply.rows.push_back(std::move(rows));
    }
    p.done(reply, std::nullopt, std::nullopt);
  }
  const std::vector<int64_t>& keys_of(size_t pull) const {
    return pulls.at(pull).request.tables.at(0).keys;
  }
};

constexpr bucket_layout buckets{64, 9};

embedding_table_config hash_table() {
  embedding_table_config c;
  c.buckets = buckets;
  return c;
}

batch_rows batch_rows_of(std::vector<int64_t> ids) {
  batch_rows rows;
  rows.keys.assign(ids.data(), ids.size());
  return rows;
}

// The keys 0 .. n-1, each once.
batch_rows first_keys(int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < n; ++k)
    ids.push_back(k);
  return batch_rows_of(ids);
}

// A row exchange of table 0, dim 2, over `shards` shards that the fake
// message path stands for.
struct over_fake_path {
  fake_rows path;
  shard_exchange over{path, std::chrono::seconds(5)};
  row_exchange exchange;

  explicit over_fake_path(int32_t shards, embedding_table_config config = hash_table())
    : exchange(over, std::move(config), shards, 0, 2) {
    over.reset_links(static_cast<size_t>(shards));
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(row_exchanges)

BOOST_AUTO_TEST_CASE(each_shard_gets_its_keys_by_bucket_and_replies_land_on_their_keys) {
  over_fake_path fake(3);
  auto& path = fake.path;
  auto& over = fake.over;
  auto& exchange = fake.exchange;
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < 40; ++k)
    ids.push_back(k % 25); // duplicates: 25 distinct keys
  auto rows = batch_rows_of(ids);
  int finished = 0;
  exchange.pull(7, rows, [&](const row_exchange::outcome& out) {
    BOOST_TEST(!out.refused);
    BOOST_TEST(!out.lost);
    ++finished;
  });
  BOOST_REQUIRE(path.pulls.size() == 3u);
  size_t asked = 0;
  for (auto& p : path.pulls) {
    BOOST_TEST(p.request.names.empty()); // rows only
    auto& keys = p.request.tables.at(0).keys;
    asked += keys.size();
    for (size_t i = 0; i < keys.size(); ++i) {
      BOOST_TEST(buckets.shard_of(keys[i], 3) == static_cast<uint32_t>(p.shard));
      if (i > 0)
        BOOST_TEST(buckets.bucket_of(keys[i - 1]) <= buckets.bucket_of(keys[i]));
    }
  }
  BOOST_TEST(asked == 25u); // each distinct key once
  path.answer(2);
  path.answer(0);
  BOOST_TEST(finished == 0);
  path.answer(1);
  BOOST_TEST(finished == 1);
  for (size_t k = 0; k < rows.keys.size(); ++k)
    BOOST_TEST(rows.values[2 * k] == static_cast<float>(rows.keys.keys()[k]));

  // The push sends each key's summed gradient and occurrences to its shard,
  // and reaches every shard, even one with no key: each counts every step.
  rows.grads.assign(rows.values.size(), 1.0f);
  auto few = batch_rows_of({3, 3, 3});
  exchange.pull(7, few, [](const row_exchange::outcome&) {});
  path.answer(3);
  few.grads = {0.5f, 0.5f};
  std::vector<exchange_part> parts;
  exchange.ask_push(few, parts);
  BOOST_TEST(parts.size() == 3u);
  over.start(exchange_kind::push, {7, 0, 4, 0}, std::move(parts), false);
  int pushed = 0;
  over.finish([&](std::vector<part_outcome>& outcomes) {
    for (auto& out : outcomes) {
      BOOST_TEST(!out.refused);
      BOOST_TEST(!out.lost);
    }
    ++pushed;
  });
  BOOST_REQUIRE(path.pushes.size() == 3u);
  for (auto& p : path.pushes) {
    bool owner = buckets.shard_of(3, 3) == static_cast<uint32_t>(p.shard);
    auto& table = p.push.tables.at(0);
    BOOST_TEST(table.keys.size() == (owner ? 1u : 0u));
    if (owner)
      BOOST_TEST(table.counts[0] == 3u);
    BOOST_TEST(table.grads.shape() == (shape_t{owner ? 1 : 0, 2}));
    p.done({}, std::nullopt, std::nullopt);
  }
  BOOST_TEST(pushed == 1);
}

BOOST_AUTO_TEST_CASE(a_fixed_size_table_sends_each_id_to_its_tf_partition) {
  for (auto strategy : {partition_strategy::mod, partition_strategy::div}) {
    auto config = hash_table();
    config.kind = table_kind::fixed;
    config.rows = 10;
    config.partition = strategy;
    over_fake_path fake(3, config);
    auto& path = fake.path;
    auto& exchange = fake.exchange;
    auto rows = batch_rows_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    exchange.pull(7, rows, [](const row_exchange::outcome&) {});
    BOOST_REQUIRE(path.pulls.size() == 3u);
    for (auto& p : path.pulls) {
      auto keys = p.request.tables.at(0).keys;
      std::sort(keys.begin(), keys.end());
      // TF's embedding_lookup over 10 rows in 3 parts: mod gives part p the
      // ids p, p+3, ...; div the ranges [0, 4), [4, 7), [7, 10).
      std::vector<int64_t> want;
      for (int64_t id = 0; id < 10; ++id)
        if ((strategy == partition_strategy::mod ? id % 3
                                                 : (id < 4   ? 0
                                                    : id < 7 ? 1
                                                             : 2))
            == p.shard)
          want.push_back(id);
      BOOST_TEST(keys == want, boost::test_tools::per_element());
    }
  }
}

// A worker's step: rows ride in the parts of its dense pull and push, one
// request a shard. The shard that holds dense variables gets its keys in
// the same request; another shard gets a request of rows only.
BOOST_AUTO_TEST_CASE(rows_ride_beside_a_steps_dense_values_and_gradients) {
  over_fake_path fake(2);
  auto& path = fake.path;
  auto& over = fake.over;
  auto& exchange = fake.exchange;
  auto rows = first_keys(20);
  const std::vector<std::string> names{"bias"};
  std::vector<exchange_part> parts(1);
  parts[0].shard = 1;
  parts[0].names = &names;
  exchange.ask_pull(rows, parts);
  BOOST_REQUIRE(parts.size() == 2u); // shard 1's, then one added for shard 0
  BOOST_TEST(parts[0].rows.size() == 1u);
  BOOST_TEST(parts[1].shard == 0);
  BOOST_TEST(!parts[1].names);
  over.start(exchange_kind::pull, {7, 0, 0, 0}, std::move(parts), false);
  BOOST_TEST(path.sent == (std::vector<std::string>{"pull:1", "pull:0"}),
             boost::test_tools::per_element());
  BOOST_TEST(path.pulls[0].request.names == names);
  int computed = 0;
  over.finish([&](std::vector<part_outcome>& outcomes) {
    BOOST_REQUIRE(outcomes.size() == 2u);
    BOOST_TEST(outcomes[0].values.size() == 1u); // the dense value
    BOOST_TEST(!exchange.take_pull(outcomes, rows));
    ++computed;
  });
  path.answer(0);
  BOOST_TEST(computed == 0);
  path.answer(1);
  BOOST_TEST(computed == 1);
  for (size_t k = 0; k < rows.keys.size(); ++k)
    BOOST_TEST(rows.values[2 * k + 1] == static_cast<float>(rows.keys.keys()[k]));

  path.sent.clear();
  rows.grads.assign(rows.values.size(), 1.0f);
  std::vector<exchange_part> push(1);
  push[0].shard = 1;
  push[0].names = &names;
  push[0].gradients = {tensor({1}, 0.5f)};
  exchange.ask_push(rows, push);
  over.start(exchange_kind::push, {7, 0, 4, 0}, std::move(push), false);
  BOOST_TEST(path.sent == (std::vector<std::string>{"push:1", "push:0"}),
             boost::test_tools::per_element());
  BOOST_TEST(path.pushes[0].push.gradients.size() == 1u); // dense and rows together
  BOOST_TEST(path.pushes[0].push.tables.size() == 1u);
  BOOST_TEST(path.pushes[1].push.gradients.empty());
  maybe_failure refused;
  over.finish([&](std::vector<part_outcome>& outcomes) { refused = outcomes[0].refused; });
  path.pushes.at(0).done({}, failure{errc::invalid_request, "a key twice"}, std::nullopt);
  path.pushes.at(1).done({}, std::nullopt, std::nullopt);
  BOOST_REQUIRE(refused); // refused whole: its dense gradients with its rows
  BOOST_TEST((refused->code == errc::invalid_request));
}

BOOST_AUTO_TEST_CASE(refusals_losses_and_shapes_surface_and_cancelled_replies_are_ignored) {
  over_fake_path fake(2);
  auto& path = fake.path;
  auto& exchange = fake.exchange;
  auto rows = first_keys(20);
  row_exchange::outcome seen;
  int finished = 0;
  auto pull = [&] {
    exchange.pull(7, rows, [&](const row_exchange::outcome& out) {
      seen = out;
      ++finished;
    });
  };
  pull();
  BOOST_REQUIRE(path.pulls.size() == 2u);
  pull_reply wrong;
  wrong.rows.push_back(tensor({1, 2})); // one row for many keys
  path.pulls[0].done(wrong, std::nullopt, std::nullopt);
  path.pulls[1].done(wrong, std::nullopt, std::nullopt);
  BOOST_TEST(finished == 1);
  BOOST_REQUIRE(seen.refused);
  BOOST_TEST(seen.refused->message.find("another shape") != std::string::npos);

  path.pulls.clear();
  pull();
  path.pulls[0].done(wrong, std::nullopt, std::string("ps:0 is gone"));
  path.answer(1);
  BOOST_TEST(finished == 2);
  BOOST_REQUIRE(seen.lost);
  BOOST_TEST(*seen.lost == "ps:0 is gone");

  // A new plan voids the exchange under way: its replies change nothing.
  path.pulls.clear();
  exchange.pull(7, rows, [&](const row_exchange::outcome&) { ++finished; });
  exchange.cancel();
  path.answer(0);
  path.answer(1);
  BOOST_TEST(finished == 2);
}

BOOST_AUTO_TEST_SUITE_END()
