// One shard's part of an embedding table: pulls never insert, pushes create
// rows from the same initial value, bad pushes change nothing, values do not
// depend on the shard count, eviction and the memory cap, and a checkpoint's
// visit/restore round trip.
#include <cmath>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "tensor/sparse/embedding_table.hpp"

using namespace troupe;

namespace {

embedding_table_config table_config(uint32_t dim = 4,
                                    sparse_optimizer_kind kind = sparse_optimizer_kind::adagrad) {
  embedding_table_config c;
  c.name = "items";
  c.dim = dim;
  c.init = {row_initializer::truncated_normal, 0.1, 7};
  c.optimizer.kind = kind;
  c.optimizer.learning_rate = 0.1;
  c.buckets.count = 64;
  return c;
}

std::vector<float> pull(const embedding_table& t, std::vector<int64_t> keys) {
  std::vector<float> out(keys.size() * t.dim());
  t.lookup(keys.data(), keys.size(), out.data());
  return out;
}

// Pushes gradient `g` (every element) to `keys`, each counted once.
maybe_failure push(embedding_table& t, std::vector<int64_t> keys, float g, int64_t step) {
  std::vector<uint32_t> counts(keys.size(), 1);
  std::vector<float> grads(keys.size() * t.dim(), g);
  return t.apply(keys.data(), counts.data(), grads.data(), keys.size(), step);
}

} // namespace

BOOST_AUTO_TEST_SUITE(embedding_tables)

BOOST_AUTO_TEST_CASE(a_pull_reads_the_initial_value_and_inserts_nothing) {
  embedding_table t(table_config());
  auto values = pull(t, {5, 1LL << 50, 5});
  BOOST_TEST(t.rows() == 0u);
  std::vector<float> want(4);
  initial_row(t.config().init, t.id(), 5, want.data(), 4);
  BOOST_TEST(std::vector<float>(values.begin(), values.begin() + 4) == want);
  BOOST_TEST(std::vector<float>(values.begin() + 8, values.end()) == want);
}

BOOST_AUTO_TEST_CASE(a_push_creates_the_row_from_its_initial_value) {
  auto config = table_config(4, sparse_optimizer_kind::sgd);
  embedding_table t(config);
  auto before = pull(t, {9});
  BOOST_TEST(!push(t, {9}, 0.5f, 0));
  BOOST_TEST(t.rows() == 1u);
  auto after = pull(t, {9});
  for (int j = 0; j < 4; ++j)
    BOOST_TEST(after[j] == before[j] - 0.05f, boost::test_tools::tolerance(1e-6f));
  // Counters: occurrences and the version of the last update.
  uint32_t counts[] = {3};
  float grads[4] = {};
  int64_t key = 9;
  BOOST_TEST(!t.apply(&key, counts, grads, 1, 41));
  bool seen = false;
  for (uint32_t b = 0; b < config.buckets.count; ++b)
    t.visit(b, [&](int64_t k, const float*, row_counters c) {
      seen = k == 9 && c.frequency == 4 && c.last_update == 41;
    });
  BOOST_TEST(seen);
}

BOOST_AUTO_TEST_CASE(bad_pushes_change_nothing) {
  embedding_table t(table_config());
  BOOST_TEST(!push(t, {1, 2}, 0.5f, 0));
  auto before = pull(t, {1, 2, 3});
  auto twice = push(t, {3, 1, 3}, 0.5f, 1);
  BOOST_TEST((twice->code == errc::invalid_request));
  BOOST_TEST(twice->message.find("key 3 twice") != std::string::npos);
  BOOST_TEST(push(t, {3, -4}, 0.5f, 1)->message.find("negative key -4") != std::string::npos);
  BOOST_TEST((push(t, {3}, std::nanf(""), 1)->code == errc::non_finite_gradient));
  BOOST_TEST(pull(t, {1, 2, 3}) == before);
  BOOST_TEST(t.rows() == 2u);
}

BOOST_AUTO_TEST_CASE(values_do_not_depend_on_how_many_shards_hold_the_table) {
  // One table, and the same table cut into 3 shards by bucket: the same
  // pushes give the same values, bit for bit.
  auto config = table_config(8, sparse_optimizer_kind::ftrl);
  embedding_table whole(config);
  std::vector<std::unique_ptr<embedding_table>> shards;
  for (int s = 0; s < 3; ++s)
    shards.push_back(std::make_unique<embedding_table>(config));
  std::mt19937_64 random(3);
  for (int64_t step = 0; step < 20; ++step) {
    std::map<uint32_t, std::vector<int64_t>> by_shard;
    std::vector<int64_t> keys;
    for (int i = 0; i < 30; ++i) {
      int64_t key = static_cast<int64_t>(random() % 200);
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        keys.push_back(key);
    }
    BOOST_TEST(!push(whole, keys, 0.01f * (step % 5 - 2), step));
    for (int64_t key : keys)
      by_shard[config.buckets.shard_of(key, 3)].push_back(key);
    for (auto& [s, part] : by_shard)
      BOOST_TEST(!push(*shards[s], part, 0.01f * (step % 5 - 2), step));
  }
  for (int64_t key = 0; key < 250; ++key)
    BOOST_TEST(pull(whole, {key}) == pull(*shards[config.buckets.shard_of(key, 3)], {key}));
}

BOOST_AUTO_TEST_CASE(visit_and_restore_round_trip_every_row_with_its_slots) {
  auto config = table_config(4, sparse_optimizer_kind::lazy_adam);
  embedding_table source(config), copy(config);
  for (int64_t step = 0; step < 5; ++step)
    BOOST_TEST(!push(source, {step, step + 1, 100 + step}, 0.1f * (step + 1), step));
  for (uint32_t b = 0; b < config.buckets.count; ++b)
    source.visit(
      b, [&](int64_t key, const float* payload, row_counters c) { copy.restore(key, payload, c); });
  BOOST_TEST(copy.rows() == source.rows());
  // The same next update on both: slots came along, so values stay equal.
  BOOST_TEST(!push(source, {2, 3}, 0.3f, 5));
  BOOST_TEST(!push(copy, {2, 3}, 0.3f, 5));
  std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5, 100, 104, 999};
  BOOST_TEST(pull(copy, keys) == pull(source, keys));
}

BOOST_AUTO_TEST_CASE(eviction_by_age_and_by_norm) {
  embedding_table t(table_config(4, sparse_optimizer_kind::sgd));
  for (int64_t step = 0; step < 10; ++step)
    BOOST_TEST(!push(t, {step}, 0.0f, step));
  // Not updated for 4 versions at version 10: keys 0..6 go.
  BOOST_TEST(t.evict({4, 0, 0}, 10) == 7u);
  BOOST_TEST(t.rows() == 3u);
  // An evicted key reads its initial value again.
  std::vector<float> fresh(4);
  initial_row(t.config().init, t.id(), 0, fresh.data(), 4);
  BOOST_TEST(pull(t, {0}) == fresh);
  // L2 norm: push key 7 far from 0, then evict the small rows.
  BOOST_TEST(!push(t, {7}, -100.0f, 10));
  BOOST_TEST(t.evict({0, 1.0, 0}, 11) == 2u);
  BOOST_TEST(t.rows() == 1u);
}

// The byte cap bounds what the table reports as its size, map slots and
// chunks included (it used to count rows at an estimated 24 bytes beside
// each, and a 64 MiB cap reported 97.7 MB): a stream of new keys past what
// fits keeps bytes() within the cap after every push, evicts the least
// recently updated rows, and keeps admitting the new ones.
BOOST_AUTO_TEST_CASE(the_byte_cap_bounds_what_the_table_reports) {
  embedding_table capped(table_config(16, sparse_optimizer_kind::adagrad)); // 64 buckets
  constexpr size_t cap = 1 << 20;
  capped.set_byte_cap(cap);
  size_t evicted = 0, most = 0;
  std::vector<int64_t> keys(500);
  for (int64_t step = 0; step < 200; ++step) {
    for (size_t i = 0; i < keys.size(); ++i)
      keys[i] = step * 500 + static_cast<int64_t>(i);
    BOOST_TEST(!push(capped, keys, 0.01f, step));
    evicted += capped.evict({}, step + 1); // as the shard does after each push
    most = std::max(most, capped.bytes());
    BOOST_TEST_REQUIRE(capped.bytes() <= cap, "step " << step << ": " << capped.bytes());
  }
  BOOST_TEST(most > cap * 9 / 10); // it did fill the cap
  BOOST_TEST(evicted + capped.cap_replaced() > 90000u);
  // The newest push is in whole; the oldest keys are gone.
  for (size_t i = 0; i < keys.size(); i += 50)
    BOOST_TEST(capped.contains(keys[i]));
  BOOST_TEST(!capped.contains(0));
  BOOST_TEST(capped.rows() > 2000u);
}

// Freed rows are reused: a capped table full of old rows takes new keys
// without growing, whatever the order of their buckets.
BOOST_AUTO_TEST_CASE(a_full_table_takes_new_keys_in_the_place_of_old_ones) {
  embedding_table capped(table_config(4, sparse_optimizer_kind::sgd));
  for (int64_t key = 0; key < 1000; ++key)
    BOOST_TEST(!push(capped, {key}, 0.0f, key));
  capped.set_byte_cap(capped.bytes());
  size_t bytes = capped.bytes();
  for (int64_t key = 2000; key < 2900; ++key)
    BOOST_TEST(!push(capped, {key}, 0.0f, key));
  BOOST_TEST(capped.bytes() == bytes);
  // Rows fill the slack of their buckets' last chunks, then replace old ones.
  BOOST_TEST(capped.rows() >= 1000u);
  BOOST_TEST(capped.cap_replaced() + (capped.rows() - 1000u) == 900u);
  BOOST_TEST(capped.cap_replaced() > 0u);
  BOOST_TEST(capped.contains(2899));
  // A key older than every row of its bucket is not restored.
  std::vector<float> payload(capped.payload_floats(), 0.5f);
  capped.restore(99999, payload.data(), {1, 3});
  BOOST_TEST(!capped.contains(99999));
  BOOST_TEST(capped.cap_refused() == 1u);
}

BOOST_AUTO_TEST_CASE(row_map_agrees_with_unordered_map_under_random_inserts_and_erases) {
  row_map map(5);
  std::unordered_map<int64_t, uint32_t> reference;
  std::mt19937_64 random(11);
  for (uint32_t i = 0; i < 20000; ++i) {
    int64_t key = static_cast<int64_t>(random() % 3000);
    uint64_t h = map.hash(key);
    if (random() % 3 == 0) {
      BOOST_TEST(map.erase(key, h) == (reference.erase(key) == 1));
    } else if (!reference.count(key)) {
      map.insert(key, h, i);
      reference[key] = i;
    }
  }
  BOOST_TEST(map.size() == reference.size());
  for (int64_t key = 0; key < 3000; ++key) {
    auto it = reference.find(key);
    BOOST_TEST(map.find(key, map.hash(key))
               == (it == reference.end() ? row_map::no_row : it->second));
  }
}

BOOST_AUTO_TEST_CASE(bad_configurations_are_refused) {
  auto c = table_config();
  c.dim = 0;
  BOOST_CHECK_THROW(embedding_table{c}, troupe_error);
  c = table_config();
  c.buckets.count = 100;
  BOOST_CHECK_THROW(embedding_table{c}, troupe_error);
  c = table_config();
  c.name.clear();
  BOOST_TEST(c.check().has_value());
}

BOOST_AUTO_TEST_SUITE_END()
