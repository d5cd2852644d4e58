// Embedding tables in checkpoint files (tensor/checkpoint/table_file.hpp):
// saved by 2 shards, restored onto 3 and onto 1 with bit-equal values and
// slots; a layout that differs refused; a save during pushes never pairs a
// value with slots from another update.
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include <unistd.h>

#include "tensor/checkpoint/table_file.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

embedding_table_config table_config(sparse_optimizer_kind kind = sparse_optimizer_kind::adagrad) {
  embedding_table_config c;
  c.name = "items";
  c.dim = 4;
  c.init = {row_initializer::truncated_normal, 0.1, 3};
  c.optimizer.kind = kind;
  c.optimizer.learning_rate = 0.1;
  c.buckets.count = 64;
  return c;
}

using shards_t = std::vector<std::unique_ptr<embedding_table>>;

shards_t make_shards(uint32_t n, const embedding_table_config& c) {
  shards_t out;
  for (uint32_t s = 0; s < n; ++s)
    out.push_back(std::make_unique<embedding_table>(c));
  return out;
}

// Pushes each key to the shard that owns its bucket.
void push(shards_t& shards, const std::vector<int64_t>& keys, float g, int64_t step) {
  auto n = static_cast<uint32_t>(shards.size());
  for (uint32_t s = 0; s < n; ++s) {
    std::vector<int64_t> part;
    for (int64_t k : keys)
      if (shards[s]->config().shard_of(k, n) == s)
        part.push_back(k);
    std::vector<uint32_t> counts(part.size(), 1);
    // A key's gradient depends on the key, not on where it sits in the push.
    std::vector<float> grads(part.size() * 4);
    for (size_t i = 0; i < grads.size(); ++i)
      grads[i] = g * static_cast<float>((part[i / 4] + static_cast<int64_t>(i % 4)) % 5 + 1);
    BOOST_REQUIRE(!shards[s]->apply(part.data(), counts.data(), grads.data(), part.size(), step));
  }
}

std::vector<float> pull(shards_t& shards, int64_t key) {
  auto n = static_cast<uint32_t>(shards.size());
  std::vector<float> out(4);
  shards[shards[0]->config().shard_of(key, n)]->lookup(&key, 1, out.data());
  return out;
}

std::string save(embedding_table& table, const std::string& path) {
  table_snapshot snapshot(table);
  safetensors_writer writer(path, snapshot.entries(), {snapshot.metadata()});
  snapshot.append_to(writer);
  writer.finish();
  return path;
}

struct scratch {
  fs::path root = fs::temp_directory_path() / ("troupe-table-test-" + std::to_string(::getpid()));
  scratch() { fs::create_directories(root); }
  ~scratch() { fs::remove_all(root); }
  std::string file(const std::string& name) const { return (root / name).string(); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(table_files)

// A hash table (by bucket) and a fixed-size one (by TF's mod and div parts).
BOOST_DATA_TEST_CASE(saved_by_two_shards_restored_onto_three_and_one_bit_equal,
                     boost::unit_test::data::make({0, 1, 2}), placement) {
  scratch dir;
  auto config = table_config(sparse_optimizer_kind::ftrl);
  if (placement > 0) {
    config.kind = table_kind::fixed;
    config.rows = 500 * 7919;
    config.partition = placement == 1 ? partition_strategy::mod : partition_strategy::div;
  }
  auto two = make_shards(2, config);
  std::mt19937_64 random(5);
  for (int64_t step = 0; step < 30; ++step) {
    std::vector<int64_t> keys;
    for (int i = 0; i < 40; ++i) {
      int64_t k = static_cast<int64_t>(random() % 500) * 7919;
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        keys.push_back(k);
    }
    push(two, keys, 0.01f * static_cast<float>(step % 7 - 3), step);
  }
  std::vector<std::string> files = {save(*two[0], dir.file("ps0.safetensors")),
                                    save(*two[1], dir.file("ps1.safetensors"))};
  // A file read once for every shard (as the chief restores), or once per
  // shard: the same rows either way.
  auto restore_onto = [&](uint32_t count, bool one_pass) {
    auto restored = make_shards(count, config);
    size_t rows = 0;
    std::vector<embedding_table*> targets;
    for (auto& t : restored)
      targets.push_back(t.get());
    for (auto& f : files)
      if (one_pass)
        rows += restore_table_rows(safetensors_file(f), targets);
      else
        for (uint32_t s = 0; s < count; ++s)
          rows += restore_table_rows(safetensors_file(f), *restored[s], s, count);
    BOOST_TEST(rows == two[0]->rows() + two[1]->rows());
    return restored;
  };
  for (uint32_t count : {3u, 1u}) {
    auto restored = restore_onto(count, count == 3);
    if (count == 3) {
      auto per_shard = restore_onto(3, false);
      for (uint32_t s = 0; s < 3; ++s)
        BOOST_TEST(restored[s]->rows() == per_shard[s]->rows());
    }
    for (int64_t k = 0; k < 500 * 7919; k += 7919)
      BOOST_TEST(pull(restored, k) == pull(two, k));
    // One more update on both, against the 2 shards restored as they were:
    // slots and counters came along too.
    auto original = restore_onto(2, false);
    std::vector<int64_t> again = {0, 7919, 15838, 3 * 7919};
    push(restored, again, 0.5f, 30);
    push(original, again, 0.5f, 30);
    for (int64_t k : again)
      BOOST_TEST(pull(restored, k) == pull(original, k));
  }
}

// What the chief sends on restore: batches of at most `batch` rows, each
// row once, each batch for the shard that owns its rows, with the row's
// payload (value and slots) and counters as saved; read a range at a time
// across both files.
BOOST_DATA_TEST_CASE(the_reader_hands_out_each_row_once_to_its_shard_in_bounded_batches,
                     boost::unit_test::data::make({1, 7, 1000}), batch) {
  scratch dir;
  auto config = table_config();
  auto two = make_shards(2, config);
  std::vector<int64_t> keys(300);
  std::iota(keys.begin(), keys.end(), 1000);
  push(two, keys, 0.25f, 3);
  push(two, {1000, 1001, 1299}, -0.5f, 4);
  safetensors_file ps0(save(*two[0], dir.file("ps0.safetensors")));
  safetensors_file ps1(save(*two[1], dir.file("ps1.safetensors")));
  saved_table_reader reader({&ps0, &ps1}, config, 3, static_cast<size_t>(batch));
  BOOST_TEST(reader.rows() == 300u);
  std::map<int64_t, int> seen;
  std::vector<size_t> per_shard(3, 0);
  size_t width = two[0]->payload_floats();
  while (auto rows = reader.next()) {
    BOOST_TEST_REQUIRE(!rows->keys.empty());
    BOOST_TEST(rows->keys.size() <= static_cast<size_t>(batch));
    BOOST_TEST_REQUIRE(rows->frequencies.size() == rows->keys.size());
    BOOST_TEST_REQUIRE(rows->last_updates.size() == rows->keys.size());
    BOOST_TEST_REQUIRE(rows->payloads.size() == rows->keys.size() * width);
    per_shard[rows->shard] += rows->keys.size();
    for (size_t r = 0; r < rows->keys.size(); ++r) {
      int64_t key = rows->keys[r];
      ++seen[key];
      BOOST_TEST(config.shard_of(key, 3) == rows->shard);
      // The row as its shard holds it: value, slots, counters.
      embedding_table one(config);
      one.restore(key, rows->payloads.data() + r * width,
                  {rows->frequencies[r], rows->last_updates[r]});
      BOOST_TEST(one.rows() == 1u);
      std::vector<float> value(4);
      one.lookup(&key, 1, value.data());
      BOOST_TEST(value == pull(two, key));
      bool pushed_twice = key == 1000 || key == 1001 || key == 1299;
      BOOST_TEST(rows->frequencies[r] == (pushed_twice ? 2u : 1u));
      BOOST_TEST(rows->last_updates[r] == (pushed_twice ? 4u : 3u));
    }
  }
  BOOST_TEST(seen.size() == 300u);
  for (auto& [key, times] : seen)
    BOOST_TEST(times == 1, "key " << key << " handed out " << times << " times");
  BOOST_TEST(reader.rows_out() == per_shard);
  BOOST_TEST(!reader.next()); // and stays at the end
}

BOOST_AUTO_TEST_CASE(a_part_outside_its_tensor_is_refused) {
  scratch dir;
  auto one = make_shards(1, table_config());
  push(one, {1, 2}, 0.1f, 0);
  safetensors_file file(save(*one[0], dir.file("t.safetensors")));
  int64_t key = 0;
  file.read_part("emb/items/keys", element_type::i64, 8, 8, &key);
  BOOST_TEST((key == 1 || key == 2));
  BOOST_CHECK_THROW(file.read_part("emb/items/keys", element_type::i64, 8, 16, &key),
                    checkpoint_error);
  BOOST_CHECK_THROW(file.read_part("emb/items/keys", element_type::i64, 24, 0, &key),
                    checkpoint_error);
  BOOST_CHECK_THROW(file.read_part("emb/items/keys", element_type::u32, 0, 4, &key),
                    checkpoint_error);
}

BOOST_AUTO_TEST_CASE(the_file_holds_typed_tensors_under_tfs_slot_names) {
  scratch dir;
  auto two = make_shards(1, table_config());
  push(two, {1, 2, 3}, 0.1f, 0);
  safetensors_file file(save(*two[0], dir.file("one.safetensors")));
  auto& entries = file.entries();
  BOOST_TEST((entries.at("emb/items/keys").type == element_type::i64));
  BOOST_TEST((entries.at("emb/items/keys").shape == shape_t{3}));
  BOOST_TEST((entries.at("emb/items/Adagrad").shape == shape_t{3, 4}));
  BOOST_TEST((entries.at("emb/items/frequencies").type == element_type::u32));
  BOOST_TEST(file.metadata().at("emb/items") == "dim=4 buckets=64 bucket_seed=0 optimizer=adagrad");
  auto keys = file.read_i64("emb/items/keys");
  std::sort(keys.begin(), keys.end());
  BOOST_TEST(keys == (std::vector<int64_t>{1, 2, 3}));
  BOOST_CHECK_THROW(file.read("emb/items/keys"), checkpoint_error);
}

BOOST_AUTO_TEST_CASE(a_fixed_size_tables_size_is_part_of_its_layout) {
  scratch dir;
  auto config = table_config();
  embedding_table big(config);
  std::vector<int64_t> keys = {3, 12};
  std::vector<uint32_t> counts = {1, 1};
  std::vector<float> grads(8, 0.5f);
  BOOST_REQUIRE(!big.apply(keys.data(), counts.data(), grads.data(), 2, 0));
  auto path = save(big, dir.file("big.safetensors"));
  config.kind = table_kind::fixed;
  config.rows = 10; // key 12 does not fit
  embedding_table small(config);
  auto layout_error = [&] {
    try {
      restore_table_rows(safetensors_file(path), small, 0, 1);
    } catch (const checkpoint_error& e) {
      return std::string(e.what());
    }
    return std::string("restored");
  }();
  // The layouts differ first (a fixed table's size is part of its layout).
  BOOST_TEST(layout_error.find("kind=fixed rows=10") != std::string::npos, layout_error);
}

BOOST_AUTO_TEST_CASE(a_table_of_another_layout_is_refused_by_name) {
  scratch dir;
  auto one = make_shards(1, table_config());
  push(one, {1}, 0.1f, 0);
  auto path = save(*one[0], dir.file("t.safetensors"));
  auto other = table_config(sparse_optimizer_kind::sgd);
  embedding_table wrong(other);
  try {
    restore_table_rows(safetensors_file(path), wrong, 0, 1);
    BOOST_FAIL("restored a table saved with another optimizer");
  } catch (const checkpoint_error& e) {
    BOOST_TEST(std::string(e.what()).find("optimizer=adagrad") != std::string::npos);
  }
  other = table_config();
  other.name = "users";
  embedding_table absent(other);
  BOOST_CHECK_THROW(restore_table_rows(safetensors_file(path), absent, 0, 1), checkpoint_error);
}

BOOST_AUTO_TEST_CASE(a_save_during_pushes_never_pairs_a_value_with_other_slots) {
  // Zero initial rows and a constant gradient g: after k updates a row's
  // Adagrad accumulator is 0.1 + k g^2 and its value is minus the sum of
  // lr g / sqrt(0.1 + i g^2), i = 1..k. Every saved row must be one of these
  // pairs, whatever the pushes did meanwhile.
  auto config = table_config();
  config.init.kind = row_initializer::zeros;
  embedding_table table(config);
  std::atomic<bool> done{false};
  std::thread pusher([&] {
    std::vector<int64_t> keys(200);
    std::vector<uint32_t> counts(200, 1);
    std::vector<float> grads(200 * 4, 0.5f);
    for (int64_t step = 0; step < 400; ++step) {
      for (size_t i = 0; i < keys.size(); ++i)
        keys[i] = static_cast<int64_t>((i * 7 + step) % 300);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      BOOST_REQUIRE(!table.apply(keys.data(), counts.data(), grads.data(), keys.size(), step));
      keys.resize(200);
    }
    done = true;
  });
  int checked = 0;
  while (!done || checked == 0) {
    table_snapshot snapshot(table);
    scratch dir;
    safetensors_writer writer(dir.file("s.safetensors"), snapshot.entries(), {snapshot.metadata()});
    snapshot.append_to(writer);
    writer.finish();
    safetensors_file file(dir.file("s.safetensors"));
    auto values = file.read("emb/items/values");
    auto accumulators = file.read("emb/items/Adagrad");
    for (size_t r = 0; r < snapshot.rows(); ++r) {
      double k = std::round((accumulators[r * 4] - 0.1) / 0.25);
      double want = 0;
      for (int i = 1; i <= k; ++i)
        want -= 0.1 * 0.5 / std::sqrt(0.1 + i * 0.25);
      BOOST_TEST(values[r * 4] == want, boost::test_tools::tolerance(1e-4));
    }
    ++checked;
  }
  pusher.join();
  BOOST_TEST(checked > 0);
}

// A checkpoint reads a frozen view of the live table: rows changed, evicted
// or added after the freeze do not show in the file, and only the rows that
// changed or left were copied aside (the save's cost), freed when it ends.
BOOST_AUTO_TEST_CASE(a_save_reads_the_rows_as_frozen_and_copies_only_those_that_change) {
  scratch dir;
  embedding_table table(table_config());
  std::vector<int64_t> all(300), recent(250), changed(50), added(20);
  std::iota(all.begin(), all.end(), 0);
  std::iota(recent.begin(), recent.end(), 0);
  std::iota(changed.begin(), changed.end(), 0);
  std::iota(added.begin(), added.end(), 1000);
  auto push_keys = [&](const std::vector<int64_t>& keys, int64_t step) {
    std::vector<uint32_t> counts(keys.size(), 1);
    std::vector<float> grads(keys.size() * 4, 0.25f);
    BOOST_REQUIRE(!table.apply(keys.data(), counts.data(), grads.data(), keys.size(), step));
  };
  push_keys(all, 0);
  for (int64_t step = 1; step < 10; ++step)
    push_keys(recent, step); // keys 250..299 stay at step 0
  // The rows as they are before the freeze, read straight from the table.
  struct saved_row {
    std::vector<float> payload;
    row_counters counters;
  };
  std::map<int64_t, saved_row> want;
  for (uint32_t b = 0; b < table.config().buckets.count; ++b)
    table.visit(b, [&](int64_t key, const float* payload, row_counters c) {
      want[key] = {{payload, payload + table.payload_floats()}, c};
    });
  {
    table_snapshot view(table);
    BOOST_TEST(view.rows() == 300u);
    BOOST_TEST(table.frozen_copies() == 0u);
    push_keys(changed, 10);
    push_keys(changed, 11);                        // a row is copied once, before its first change
    push_keys(added, 10);                          // new rows are not in the view
    BOOST_TEST(table.evict({5, 0, 0}, 11) == 50u); // keys 250..299
    BOOST_TEST(table.frozen_copies() == 100u);
    safetensors_writer writer(dir.file("during.safetensors"), view.entries(), {view.metadata()});
    view.append_to(writer);
    writer.finish();
  }
  BOOST_TEST(table.frozen_copies() == 0u);
  push_keys(changed, 12);
  BOOST_TEST(table.frozen_copies() == 0u); // the view ended: nothing is copied any more
  safetensors_file during(dir.file("during.safetensors"));
  auto keys = during.read_i64("emb/items/keys");
  auto values = during.read("emb/items/values");
  auto accumulators = during.read("emb/items/Adagrad");
  auto frequencies = during.read_u32("emb/items/frequencies");
  auto last_updates = during.read_u32("emb/items/last_updates");
  BOOST_REQUIRE(keys.size() == want.size());
  BOOST_REQUIRE(values.size() == keys.size() * 4 && accumulators.size() == keys.size() * 4);
  for (size_t r = 0; r < keys.size(); ++r) {
    auto it = want.find(keys[r]);
    BOOST_REQUIRE(it != want.end());
    auto& row = it->second;
    BOOST_TEST(std::equal(row.payload.begin(), row.payload.begin() + 4, values.data() + r * 4));
    BOOST_TEST(std::equal(row.payload.begin() + 4, row.payload.end(), accumulators.data() + r * 4));
    BOOST_TEST(frequencies[r] == row.counters.frequency);
    BOOST_TEST(last_updates[r] == row.counters.last_update);
  }
}

BOOST_AUTO_TEST_CASE(a_view_replaced_by_a_newer_one_refuses_to_be_read) {
  embedding_table table(table_config());
  std::vector<int64_t> keys = {1, 2, 3};
  std::vector<uint32_t> counts(3, 1);
  std::vector<float> grads(12, 0.5f);
  BOOST_REQUIRE(!table.apply(keys.data(), counts.data(), grads.data(), 3, 0));
  table_snapshot older(table);
  table_snapshot newer(table);
  std::vector<float> out(3 * 4);
  BOOST_CHECK_THROW(older.copy_rows(1, 0, 3, out.data()), troupe_error);
  BOOST_CHECK_NO_THROW(newer.copy_rows(1, 0, 3, out.data()));
  BOOST_CHECK_THROW(newer.copy_rows(1, 2, 2, out.data()), troupe_error); // past its rows
}

BOOST_AUTO_TEST_SUITE_END()
