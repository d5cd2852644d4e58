// A step's embedding rows with the shards (actors/exchange/row_exchange.hpp),
// through a shard_exchange over a fake message path (no bulk links): each shard asked only for the keys whose bucket
// it owns, sorted by bucket; replies scattered back to their keys in any
// order; sync pushes to every shard; rows riding beside a step's dense
// values and gradients (a push's rows sent before its gradients); a
// refusal, a loss and a wrong shape surfacing once; a cancelled exchange
// ignoring late replies.
#include <algorithm>
#include <map>

#include <boost/test/unit_test.hpp>

#include "actors/exchange/row_exchange.hpp"

using namespace troupe;

namespace {

struct fake_rows : message_path {
  struct pull_request {
    int32_t shard;
    std::vector<int64_t> keys;
    pull_done done;
  };
  struct push_request {
    int32_t shard;
    std::vector<int64_t> keys;
    std::vector<uint32_t> counts;
    tensor grads;
    push_done done;
  };
  std::vector<pull_request> pulls;
  std::vector<push_request> pushes;
  std::vector<std::string> sent; // "pull:S", "rows:S", "push:S", "push_rows:S", in order
  std::vector<pull_done> dense_pulls;
  std::vector<push_done> dense_pushes;

  void pull(int32_t shard, uint64_t, const std::vector<std::string>&, wire_precision,
            pull_done done) override {
    sent.push_back("pull:" + std::to_string(shard));
    dense_pulls.push_back(std::move(done));
  }
  void push(int32_t shard, const push_header&, const std::vector<std::string>&, std::vector<tensor>,
            push_done done) override {
    sent.push_back("push:" + std::to_string(shard));
    dense_pushes.push_back(std::move(done));
  }
  void fetch(int32_t, uint64_t, const copy_tensor&, pull_done) override {}
  void pull_rows(int32_t shard, uint64_t, int32_t, std::vector<int64_t> keys,
                 pull_done done) override {
    sent.push_back("rows:" + std::to_string(shard));
    pulls.push_back({shard, std::move(keys), std::move(done)});
  }
  void push_rows(int32_t shard, const push_header&, int32_t, std::vector<int64_t> keys,
                 std::vector<uint32_t> counts, tensor grads, push_done done) override {
    sent.push_back("push_rows:" + std::to_string(shard));
    pushes.push_back(
      {shard, std::move(keys), std::move(counts), std::move(grads), std::move(done)});
  }

  // Answers pull i with each key's row [key, key] (dim 2).
  void answer(size_t i) {
    auto& p = pulls.at(i);
    std::vector<tensor> values{tensor({static_cast<int64_t>(p.keys.size()), 2})};
    for (size_t k = 0; k < p.keys.size(); ++k)
      values[0].data()[2 * k] = values[0].data()[2 * k + 1] = static_cast<float>(p.keys[k]);
    p.done(values, std::nullopt, std::nullopt);
  }
};

constexpr bucket_layout buckets{64, 9};

embedding_table_config hash_table() {
  embedding_table_config c;
  c.buckets = buckets;
  return c;
}

batch_rows rows_of(std::vector<int64_t> ids) {
  batch_rows rows;
  rows.keys.assign(ids.data(), ids.size());
  return rows;
}

// The keys 0 .. n-1, each once.
batch_rows first_keys(int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < n; ++k)
    ids.push_back(k);
  return rows_of(ids);
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
  auto rows = rows_of(ids);
  int finished = 0;
  exchange.pull(7, rows, [&](const row_exchange::outcome& out) {
    BOOST_TEST(!out.refused);
    BOOST_TEST(!out.lost);
    ++finished;
  });
  BOOST_REQUIRE(path.pulls.size() == 3u);
  size_t asked = 0;
  for (auto& p : path.pulls) {
    asked += p.keys.size();
    for (size_t i = 0; i < p.keys.size(); ++i) {
      BOOST_TEST(buckets.shard_of(p.keys[i], 3) == static_cast<uint32_t>(p.shard));
      if (i > 0)
        BOOST_TEST(buckets.bucket_of(p.keys[i - 1]) <= buckets.bucket_of(p.keys[i]));
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

  // The push sends each key's summed gradient and occurrences to its shard;
  // sync pushes reach every shard, even one with no key.
  rows.grads.assign(rows.values.size(), 1.0f);
  auto few = rows_of({3, 3, 3});
  exchange.pull(7, few, [](const row_exchange::outcome&) {});
  path.answer(3);
  few.grads = {0.5f, 0.5f};
  std::vector<exchange_part> parts;
  exchange.ask_push(few, true, parts);
  BOOST_TEST(parts.size() == 3u);
  over.start(exchange_kind::push, {7, 0, 4, 0}, std::move(parts), false);
  int pushed = 0;
  over.finish([&](std::vector<part_outcome>& outcomes) {
    auto out = exchange.pushed(outcomes);
    BOOST_TEST(!out.refused);
    BOOST_TEST(!out.lost);
    ++pushed;
  });
  BOOST_REQUIRE(path.pushes.size() == 3u);
  for (auto& p : path.pushes) {
    bool owner = buckets.shard_of(3, 3) == static_cast<uint32_t>(p.shard);
    BOOST_TEST(p.keys.size() == (owner ? 1u : 0u));
    if (owner)
      BOOST_TEST(p.counts[0] == 3u);
    BOOST_TEST(p.grads.shape() == (shape_t{owner ? 1 : 0, 2}));
    p.done(std::nullopt, std::nullopt);
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
    auto rows = rows_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    exchange.pull(7, rows, [](const row_exchange::outcome&) {});
    BOOST_REQUIRE(path.pulls.size() == 3u);
    for (auto& p : path.pulls) {
      auto keys = p.keys;
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

// A worker's step: rows ride in the parts of its dense pull and push. The
// shard that holds dense variables gets its keys in the same part; another
// shard gets a part of rows only. Over BASP the rows of a push go before
// its dense gradients, the rows of a pull after its dense values.
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
  BOOST_TEST(parts[0].table == 0);
  BOOST_TEST(parts[1].shard == 0);
  BOOST_TEST(!parts[1].names);
  over.start(exchange_kind::pull, {7, 0, 0, 0}, std::move(parts), false);
  BOOST_TEST(path.sent == (std::vector<std::string>{"pull:1", "rows:1", "rows:0"}),
             boost::test_tools::per_element());
  int computed = 0;
  over.finish([&](std::vector<part_outcome>& outcomes) {
    BOOST_REQUIRE(outcomes.size() == 2u);
    BOOST_TEST(outcomes[0].values.size() == 1u); // the dense value
    auto out = exchange.take_pull(outcomes, rows);
    BOOST_TEST(!out.refused);
    BOOST_TEST(!out.lost);
    ++computed;
  });
  std::vector<tensor> bias{tensor({1}, 3.0f)};
  path.dense_pulls.at(0)(bias, std::nullopt, std::nullopt);
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
  exchange.ask_push(rows, false, push);
  over.start(exchange_kind::push, {7, 0, 4, 0}, std::move(push), false);
  BOOST_TEST(path.sent == (std::vector<std::string>{"push_rows:1", "push:1", "push_rows:0"}),
             boost::test_tools::per_element());
  row_exchange::outcome rows_pushed;
  maybe_failure dense_refused;
  over.finish([&](std::vector<part_outcome>& outcomes) {
    rows_pushed = exchange.pushed(outcomes);
    dense_refused = outcomes[0].refused;
  });
  path.pushes.at(0).done(failure{errc::stale_gradient, "rows of step 4 are stale"}, std::nullopt);
  path.dense_pushes.at(0)(std::nullopt, std::nullopt);
  path.pushes.at(1).done(std::nullopt, std::nullopt);
  BOOST_REQUIRE(rows_pushed.refused); // the rows' refusal is theirs, not the dense push's
  BOOST_TEST((rows_pushed.refused->code == errc::stale_gradient));
  BOOST_TEST(!dense_refused);
}

BOOST_AUTO_TEST_CASE(refusals_losses_and_shapes_surface_and_cancelled_replies_are_ignored) {
  over_fake_path fake(2);
  auto& path = fake.path;
  auto& exchange = fake.exchange;
  auto rows = first_keys(20);
  row_exchange::outcome seen;
  int finished = 0;
  exchange.pull(7, rows, [&](const row_exchange::outcome& out) {
    seen = out;
    ++finished;
  });
  BOOST_REQUIRE(path.pulls.size() == 2u);
  std::vector<tensor> wrong{tensor({1, 2})}; // one row for many keys
  path.pulls[0].done(wrong, std::nullopt, std::nullopt);
  path.pulls[1].done(wrong, std::nullopt, std::string("ps:1 is gone"));
  BOOST_TEST(finished == 1);
  BOOST_REQUIRE(seen.refused);
  BOOST_TEST(seen.refused->message.find("another shape") != std::string::npos);
  BOOST_REQUIRE(seen.lost);
  BOOST_TEST(*seen.lost == "ps:1 is gone");

  // A new plan voids the exchange under way: its replies change nothing.
  path.pulls.clear();
  exchange.pull(7, rows, [&](const row_exchange::outcome&) { ++finished; });
  exchange.cancel();
  path.answer(0);
  path.answer(1);
  BOOST_TEST(finished == 1);
}

BOOST_AUTO_TEST_SUITE_END()
