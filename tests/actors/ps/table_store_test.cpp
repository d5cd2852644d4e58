// A shard's embedding tables (actors/ps/table_store.hpp): which keys a shard
// owns, the limits, admission, eviction, sync mode's per-row averaging,
// initial values that do not depend on the shard count, and lookups on
// other threads (bulk connections') beside the shard's pushes.
#include <atomic>
#include <cmath>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "actors/ps/table_store.hpp"
#include "tests/support/tables.hpp"

using namespace troupe;

namespace {

table_setup sgd_table(uint32_t dim = 2) {
  return troupe::testing::sgd_table_setup(dim, {row_initializer::normal, 0.1, 7}, {64, 3}, 100);
}

// Keys 0..n that shard `shard` of `shards` owns.
std::vector<int64_t> owned(const table_setup& s, int32_t shard, int32_t shards, size_t n) {
  std::vector<int64_t> out;
  for (int64_t k = 0; out.size() < n; ++k)
    if (s.table.buckets.shard_of(k, static_cast<uint32_t>(shards)) == static_cast<uint32_t>(shard))
      out.push_back(k);
  return out;
}

tensor grads_of(size_t n, uint32_t dim, float value) {
  return tensor({static_cast<int64_t>(n), static_cast<int64_t>(dim)}, value);
}

// An async push of one table's rows, checked then applied, as the shard's
// service does.
maybe_failure apply(table_store& store, int32_t table, std::vector<int64_t> keys,
                    std::vector<uint32_t> counts, tensor grads) {
  step_rows rows{table, std::move(keys), std::move(counts), std::move(grads)};
  if (auto refused = store.check(rows))
    return refused;
  store.apply(rows);
  return std::nullopt;
}

} // namespace

BOOST_AUTO_TEST_SUITE(table_stores)

BOOST_AUTO_TEST_CASE(initial_rows_do_not_depend_on_the_shard_count_and_pulls_insert_nothing) {
  auto setup = sgd_table();
  table_store one, of_three;
  BOOST_REQUIRE(!one.configure({setup}, 0, 1, false, 0));
  BOOST_REQUIRE(!of_three.configure({setup}, 2, 3, false, 0));
  auto keys = owned(setup, 2, 3, 5);
  tensor a, b;
  BOOST_REQUIRE(!one.lookup(0, keys, a));
  BOOST_REQUIRE(!of_three.lookup(0, keys, b));
  BOOST_TEST(a.bit_equal(b));
  BOOST_TEST(a[0] != 0.0f);
  BOOST_TEST(one.rows() == 0u); // pulled, not inserted
}

BOOST_AUTO_TEST_CASE(keys_of_other_shards_negative_keys_and_oversized_requests_are_refused) {
  auto setup = sgd_table();
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 2, false, 0));
  tensor out;
  auto foreign = owned(setup, 1, 2, 1);
  auto err = store.lookup(0, foreign, out);
  BOOST_REQUIRE(err);
  BOOST_TEST(err->message.find("belongs to ps:1") != std::string::npos, err->message);
  BOOST_TEST(store.lookup(0, {-4}, out)->message.find("negative") != std::string::npos);
  BOOST_TEST(store.lookup(1, owned(setup, 0, 2, 1), out)->message.find("no embedding table 1")
             != std::string::npos);
  auto many = owned(setup, 0, 2, 101);
  auto big = store.lookup(0, many, out);
  BOOST_REQUIRE(big);
  BOOST_TEST(big->message.find("embedding.max-keys-per-request = 100") != std::string::npos);
  // A push whose shapes disagree, or with a NaN, changes nothing.
  auto keys = owned(setup, 0, 2, 2);
  BOOST_TEST(apply(store, 0, keys, {1, 1}, grads_of(2, 3, 1.0f)).has_value());
  BOOST_TEST(apply(store, 0, keys, {1}, grads_of(2, 2, 1.0f)).has_value());
  auto nan = grads_of(2, 2, 1.0f);
  nan.data()[3] = NAN;
  BOOST_TEST((apply(store, 0, keys, {1, 1}, nan)->code == errc::non_finite_gradient));
  BOOST_TEST(store.rows() == 0u);
}

BOOST_AUTO_TEST_CASE(async_pushes_apply_at_once_from_the_initial_value) {
  auto setup = sgd_table();
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0));
  std::vector<int64_t> keys{5, 9};
  tensor before, after;
  BOOST_REQUIRE(!store.lookup(0, keys, before));
  BOOST_REQUIRE(!apply(store, 0, keys, {2, 1}, grads_of(2, 2, 0.5f)));
  BOOST_REQUIRE(!store.lookup(0, keys, after));
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(after[i] == before[i] - 0.5f);
  auto figures = store.figures(0, 1);
  BOOST_TEST(figures.rows == 2u);
  BOOST_TEST(figures.admitted == 2u);
  BOOST_REQUIRE(figures.hottest.size() == 1u);
  BOOST_TEST(figures.hottest[0].first == 5); // pushed twice
  BOOST_TEST(figures.hottest[0].second == 2u);
}

// A bulk connection's thread looks rows up while the shard's own thread
// applies pushes and configures new runs: every row read is whole (one
// push's, never half of one), no lookup fails, nothing is freed under a
// lookup (scripts/fuzz runs this under ASan), and lookups on two threads
// are all counted.
BOOST_AUTO_TEST_CASE(lookups_on_other_threads_meet_pushes_and_new_runs_safely) {
  constexpr uint32_t dim = 16;
  auto setup = sgd_table(dim);
  setup.table.init = {row_initializer::zeros, 0.0, 7};
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0));
  std::vector<int64_t> keys;
  for (int64_t k = 1; k <= 50; ++k)
    keys.push_back(k);
  std::vector<uint32_t> once(keys.size(), 1);
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, refused{0}, lookups{0};
  std::thread reader([&] {
    tensor out;
    while (!done) {
      if (store.lookup(0, keys, out)) {
        ++refused;
        continue;
      }
      ++lookups;
      for (size_t r = 0; r < keys.size(); ++r)
        for (uint32_t i = 1; i < dim; ++i)
          if (out[r * dim + i] != out[r * dim])
            ++torn;
    }
  });
  for (int run = 0; run < 3; ++run) {
    // Each run meets the reader at least once, however the threads are scheduled.
    for (int seen = lookups.load(); lookups.load() == seen;)
      std::this_thread::yield();
    for (int push = 0; push < 200; ++push) // SGD at 1.0: each push adds 1 to every value
      BOOST_REQUIRE(!apply(store, 0, keys, once, grads_of(keys.size(), dim, -1.0f)));
    BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0)); // a new run's tables
  }
  done = true;
  reader.join();
  BOOST_TEST(torn.load() == 0);
  BOOST_TEST(refused.load() == 0);
  BOOST_TEST(lookups.load() > 0);

  auto before = store.figures(0, 0).pulled_keys; // the reader's since the last run began
  auto look_up = [&] {
    tensor out;
    for (int i = 0; i < 500; ++i)
      if (store.lookup(0, keys, out))
        ++refused;
  };
  std::thread other(look_up);
  look_up();
  other.join();
  BOOST_TEST(refused.load() == 0);
  BOOST_TEST(store.figures(0, 0).pulled_keys - before == 1000u * keys.size());
}

BOOST_AUTO_TEST_CASE(admission_by_count_creates_a_row_only_once_its_key_was_seen_enough) {
  auto setup = sgd_table();
  setup.admission.after_count = 3;
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0));
  BOOST_REQUIRE(!apply(store, 0, {5}, {2}, grads_of(1, 2, 1.0f)));
  BOOST_TEST(store.rows() == 0u);
  BOOST_REQUIRE(!apply(store, 0, {5}, {1}, grads_of(1, 2, 1.0f)));
  BOOST_TEST(store.rows() == 1u);
  BOOST_TEST(store.figures(0, 0).not_admitted == 2u);
  // Probability admission follows from (key, version): the same on a rerun.
  setup.admission = {0, 0.5};
  table_store a, b;
  BOOST_REQUIRE(!a.configure({setup}, 0, 1, false, 0));
  BOOST_REQUIRE(!b.configure({setup}, 0, 1, false, 0));
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 40; ++k)
    keys.push_back(k);
  std::vector<uint32_t> ones(40, 1);
  BOOST_REQUIRE(!apply(a, 0, keys, ones, grads_of(40, 2, 1.0f)));
  BOOST_REQUIRE(!apply(b, 0, keys, ones, grads_of(40, 2, 1.0f)));
  BOOST_TEST(a.rows() == b.rows());
  BOOST_TEST(a.rows() > 5u);
  BOOST_TEST(a.rows() < 35u);
}

// Each apply publishes the table's rows and admissions into the process's
// metrics, by table and shard; a new run sets the rows back to 0.
BOOST_AUTO_TEST_CASE(applies_publish_rows_and_admissions_as_metrics) {
  auto setup = sgd_table();
  setup.table.name = "metered"; // this test's own labels
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 7, 8, false, 0));
  BOOST_REQUIRE(!apply(store, 0, owned(setup, 7, 8, 3), {1, 1, 1}, grads_of(3, 2, 1.0f)));
  auto has = [](const std::string& line) {
    return metrics::process_registry().render().find(line + "\n") != std::string::npos;
  };
  BOOST_TEST(has("troupe_table_rows{table=\"metered\",shard=\"7\"} 3"));
  BOOST_TEST(has("troupe_table_admitted_rows_total{table=\"metered\",shard=\"7\"} 3"));
  BOOST_TEST(
    has("troupe_table_bytes{table=\"metered\",shard=\"7\"} " + std::to_string(store.bytes())));
  store.reset();
  BOOST_TEST(has("troupe_table_rows{table=\"metered\",shard=\"7\"} 0"));
  BOOST_TEST(has("troupe_table_admitted_rows_total{table=\"metered\",shard=\"7\"} 3"));
}

BOOST_AUTO_TEST_CASE(rows_not_updated_for_n_versions_are_evicted) {
  auto setup = sgd_table();
  setup.eviction.after_steps = 2;
  setup.evict_interval = 1;
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0));
  BOOST_REQUIRE(!apply(store, 0, {1}, {1}, grads_of(1, 2, 1.0f)));
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(!apply(store, 0, {2}, {1}, grads_of(1, 2, 1.0f)));
  auto figures = store.figures(0, 0);
  BOOST_TEST(figures.rows == 1u); // key 1 went, key 2 stays
  BOOST_TEST(figures.evicted == 1u);
}

// embedding.max-bytes-per-shard bounds the table's reported bytes: 2.1e7
// ids under a 64 MiB cap once reported 97.7 MB, the map's slots and the
// chunks' slack not counted against it. Here 200,000 ids of dim 16 with
// Adagrad (27 MB of rows) under an 8 MiB cap.
BOOST_AUTO_TEST_CASE(a_table_stays_within_max_bytes_per_shard) {
  auto setup = sgd_table(16);
  setup.table.optimizer.kind = sparse_optimizer_kind::adagrad;
  setup.table.buckets = {1024, 3};
  setup.max_keys = 1000;
  setup.eviction.max_bytes = 8 << 20;
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, false, 0));
  size_t most = 0;
  std::vector<int64_t> keys(1000);
  for (int64_t push = 0; push < 200; ++push) {
    for (size_t i = 0; i < keys.size(); ++i)
      keys[i] = push * 1000 + static_cast<int64_t>(i);
    BOOST_REQUIRE(!apply(store, 0, keys, std::vector<uint32_t>(keys.size(), 1),
                         grads_of(keys.size(), 16, 0.1f)));
    most = std::max<size_t>(most, store.figures(0, 0).bytes);
  }
  auto figures = store.figures(0, 0);
  BOOST_TEST(most <= setup.eviction.max_bytes, most << " bytes reported at most");
  BOOST_TEST(figures.evicted > 100000u);
  BOOST_TEST(figures.rows > 30000u);
}

// Which pushes count is the shard's update_rule's; the store sums what it
// is given and reduces each row over the workers that touched it.
BOOST_AUTO_TEST_CASE(sync_averages_each_row_over_the_workers_that_touched_it) {
  auto setup = sgd_table(1);
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 0, 1, true, 0));
  tensor start;
  BOOST_REQUIRE(!store.lookup(0, {1, 2}, start));
  // Worker 0 touches keys 1 and 2, worker 1 only key 1.
  step_rows first{0, {1, 2}, {1, 1}, grads_of(2, 1, 1.0f)};
  step_rows second{0, {1}, {1}, tensor({1, 1}, 3.0f)};
  BOOST_REQUIRE(!store.check(first));
  BOOST_REQUIRE(!store.check(second));
  store.add(first);
  store.add(second);
  store.apply_step(2);
  tensor after;
  BOOST_REQUIRE(!store.lookup(0, {1, 2}, after));
  BOOST_TEST(after[0] == start[0] - 2.0f); // (1 + 3) / 2: both touched it
  BOOST_TEST(after[1] == start[1] - 1.0f); // worker 0's whole gradient
}

BOOST_AUTO_TEST_CASE(enum_values_a_peer_made_up_are_refused) {
  auto setup = sgd_table();
  setup.reduction = static_cast<sync_reduction>(7);
  table_store store;
  auto err = store.configure({setup}, 0, 1, false, 0);
  BOOST_REQUIRE(err);
  BOOST_TEST(err->message.find("unknown") != std::string::npos);
  BOOST_TEST(store.configure({sgd_table()}, 3, 2, false, 0).has_value());
  auto fixed = sgd_table();
  fixed.table.kind = static_cast<table_kind>(5);
  BOOST_TEST(store.configure({fixed}, 0, 1, false, 0).has_value());
}

BOOST_AUTO_TEST_CASE(a_fixed_size_table_holds_its_tf_partition_and_nothing_past_its_rows) {
  auto setup = sgd_table();
  setup.table.kind = table_kind::fixed;
  setup.table.rows = 10;
  setup.table.partition = partition_strategy::div; // parts [0, 4), [4, 7), [7, 10)
  table_store store;
  BOOST_REQUIRE(!store.configure({setup}, 1, 3, false, 0));
  tensor out;
  BOOST_TEST(!store.lookup(0, {4, 5, 6}, out));
  auto foreign = store.lookup(0, {3}, out);
  BOOST_REQUIRE(foreign);
  BOOST_TEST(foreign->message.find("belongs to ps:0") != std::string::npos, foreign->message);
  auto past = store.lookup(0, {10}, out);
  BOOST_REQUIRE(past);
  BOOST_TEST(past->message.find("past the fixed-size table's 10 rows") != std::string::npos,
             past->message);
  BOOST_TEST(!apply(store, 0, {5}, {1}, grads_of(1, 2, 1.0f)));
  BOOST_TEST(store.rows() == 1u);
  // Admission and eviction are a hash table's: refused on a fixed one.
  setup.eviction.after_steps = 10;
  auto refused = table_store{}.configure({setup}, 0, 1, false, 0);
  BOOST_REQUIRE(refused);
  BOOST_TEST(refused->message.find("apply to hash tables") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
