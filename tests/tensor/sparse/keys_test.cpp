// Key placement and initial rows: TF's mod and div arithmetic, virtual
// buckets, and initial values that depend on nothing but (seed, table, key).
#include <map>
#include <set>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "tensor/sparse/keys.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(sparse_keys)

BOOST_AUTO_TEST_CASE(mix64_is_murmur3s_finalizer_and_not_the_identity) {
  BOOST_TEST(mix64(0) == 0u);
  BOOST_TEST(mix64(1) == 0xb456bcfc34c2cb2cULL);
  BOOST_TEST(mix64(2) != 2u);
}

BOOST_AUTO_TEST_CASE(category_keys_keep_ids_and_hash_strings_stably) {
  BOOST_TEST(category_key("0") == 0);
  BOOST_TEST(category_key("671") == 671);
  BOOST_TEST(category_key(std::to_string(max_plain_id)) == max_plain_id);
  // Leading zeros, signs and letters are strings: hashed above 2^48.
  // A digit string too long for an id is hashed (it overflowed int64 once:
  // tests/fuzz/corpus/sparse_lines/crash_long_digit_value).
  for (const char* text :
       {"007", "-3", "68fd1e64", "", "281474976710656", "22222222222222222222222222222"}) {
    int64_t key = category_key(text);
    BOOST_TEST(key >= (int64_t{1} << 48));
    BOOST_TEST(key == category_key(text));
  }
  BOOST_TEST(category_key("68fd1e64") != category_key("68fd1e65"));
  // The documented hash (docs/embeddings.md): FNV-1a 64, then mix64.
  BOOST_TEST(hash_bytes("a") == mix64(0xaf63dc4c8601ec8cULL));
}

BOOST_AUTO_TEST_CASE(field_keys_keep_fields_apart) {
  BOOST_TEST(field_key(0, "7") == ((int64_t{1} << 49) | 7));
  BOOST_TEST(field_key(2, "7") == ((int64_t{3} << 49) | 7));
  BOOST_TEST(field_key(max_shared_fields - 1, "x") > 0);
  BOOST_CHECK_THROW(field_key(max_shared_fields, "x"), troupe_error);
}

BOOST_AUTO_TEST_CASE(tf_div_and_mod_on_13_ids_over_5_parts) {
  // embedding_ops.py: div gives the first 13 % 5 = 3 parts 3 rows, the rest 2.
  std::vector<part_row> div;
  for (int64_t id = 0; id < 13; ++id)
    div.push_back(locate(partition_strategy::div, id, 13, 5));
  std::vector<part_row> want = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}, {2, 0},
                                {2, 1}, {2, 2}, {3, 0}, {3, 1}, {4, 0}, {4, 1}};
  BOOST_TEST((div == want));
  BOOST_TEST((locate(partition_strategy::mod, 7, 13, 5) == part_row{2, 1}));
  BOOST_TEST((locate(partition_strategy::mod, 12, 13, 5) == part_row{2, 2}));
  // Every part of both strategies holds 2 or 3 rows, and no (part, row) twice.
  for (auto strategy : {partition_strategy::mod, partition_strategy::div}) {
    std::set<std::pair<int64_t, int64_t>> seen;
    std::map<int64_t, int> sizes;
    for (int64_t id = 0; id < 13; ++id) {
      auto at = locate(strategy, id, 13, 5);
      BOOST_TEST(seen.insert({at.part, at.row}).second);
      ++sizes[at.part];
    }
    for (auto& [part, size] : sizes)
      BOOST_TEST((size == 2 || size == 3));
  }
}

BOOST_AUTO_TEST_CASE(fewer_ids_than_parts) {
  for (auto strategy : {partition_strategy::mod, partition_strategy::div})
    for (int64_t id = 0; id < 3; ++id)
      BOOST_TEST((locate(strategy, id, 3, 5) == part_row{id, 0}));
  BOOST_CHECK_THROW(locate(partition_strategy::div, 3, 3, 5), troupe_error);
  BOOST_CHECK_THROW(locate(partition_strategy::mod, -1, 3, 5), troupe_error);
  BOOST_CHECK_THROW(locate(partition_strategy::mod, 0, 3, 0), troupe_error);
}

BOOST_AUTO_TEST_CASE(a_fixed_vocabulary_lays_fields_end_to_end) {
  fixed_vocabulary v({3, 5});
  BOOST_TEST(v.rows() == 8);
  BOOST_TEST(v.row_of(field_key(0, "2"), 0) == 2);
  BOOST_TEST(v.row_of(field_key(1, "0"), 1) == 3);
  BOOST_TEST(v.row_of(field_key(1, "4"), 1) == 7);
  // libsvm's keys carry no field prefix: the index is the id.
  BOOST_TEST(v.row_of(2, 0) == 2);
  // A string is hashed into its field's range, as TF's hash-bucket column.
  auto hashed = v.row_of(field_key(1, "a3f0"), 1);
  BOOST_TEST(hashed == 3 + (category_key("a3f0") & max_plain_id) % 5);
  // An id past its field's size is the data's error, named.
  try {
    v.row_of(field_key(0, "3"), 0);
    BOOST_FAIL("id 3 of a field of 3 rows was accepted");
  } catch (const data_error& e) {
    BOOST_TEST(std::string(e.what()).find("field 0 holds id 3, outside its 3 rows")
                 != std::string::npos,
               e.what());
    BOOST_TEST(std::string(e.what()).find("embedding.vocabulary[0]") != std::string::npos);
  }
  BOOST_CHECK_THROW(v.row_of(field_key(2, "0"), 2), data_error);
  // id-mapping hash: every value hashed into its field's rows, ids too.
  fixed_vocabulary hashed_ids({3, 5}, id_mapping::hash);
  BOOST_TEST(hashed_ids.row_of(field_key(0, "3"), 0) == int64_t(mix64(3) % 3));
  BOOST_TEST(hashed_ids.row_of(field_key(1, "81789382"), 1) == 3 + int64_t(mix64(81789382) % 5));
  BOOST_CHECK_THROW(fixed_vocabulary({4, 0}), troupe_error);
  BOOST_CHECK_THROW(fixed_vocabulary({max_plain_id, 2}), troupe_error);
}

BOOST_AUTO_TEST_CASE(buckets_spread_dense_ids_and_shards_get_contiguous_ranges) {
  bucket_layout layout;
  std::vector<int> per_bucket(layout.count);
  for (int64_t id = 0; id < 1024 * 64; ++id)
    ++per_bucket[layout.bucket_of(id)];
  // Dense ids over 1024 buckets: about 64 each, none empty, none doubled.
  for (int n : per_bucket)
    BOOST_TEST((n > 20 && n < 120));
  for (uint32_t shards : {1u, 2u, 3u, 7u}) {
    std::vector<int> owned(shards);
    uint32_t previous = 0;
    for (uint32_t b = 0; b < layout.count; ++b) {
      uint32_t s = layout.shard_of_bucket(b, shards);
      BOOST_TEST(s >= previous);
      previous = s;
      ++owned[s];
    }
    for (int n : owned)
      BOOST_TEST(std::abs(n - int(layout.count / shards)) <= 1);
  }
  BOOST_TEST(!(bucket_layout{1024, 0}.check()));
  BOOST_TEST((bucket_layout{1000, 0}.check().has_value()));
  BOOST_TEST((bucket_layout{0, 0}.check().has_value()));
  BOOST_TEST((bucket_layout{1, 0}.bucket_of(12345) == 0u));
}

BOOST_AUTO_TEST_CASE(initial_rows_depend_on_seed_table_and_key_only) {
  row_init init{row_initializer::truncated_normal, 0.5, 42};
  std::vector<float> a(64), b(64), c(64), d(64);
  initial_row(init, 7, 123, a.data(), 64);
  initial_row(init, 7, 123, b.data(), 64);
  initial_row(init, 7, 124, c.data(), 64);
  initial_row(init, 8, 123, d.data(), 64);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  BOOST_TEST(a != d);
  // Truncated at two deviations.
  for (float v : a)
    BOOST_TEST(std::abs(v) <= 1.0f);
  row_init uniform{row_initializer::uniform, 0.1, 1};
  double sum = 0;
  for (int64_t key = 0; key < 1000; ++key) {
    initial_row(uniform, 1, key, a.data(), 64);
    for (float v : a) {
      BOOST_TEST(std::abs(v) <= 0.1f);
      sum += v;
    }
  }
  BOOST_TEST(std::abs(sum / 64000) < 0.002);
  // Normal rows: both halves of each Box-Muller pair are standard normals,
  // uncorrelated (elements 2p and 2p+1); truncated at two deviations the
  // variance is 0.774. An odd dimension's last element has a pair of its own.
  for (auto kind : {row_initializer::normal, row_initializer::truncated_normal}) {
    double n = 0, mean = 0, square = 0, cross = 0;
    std::vector<float> row(33);
    for (int64_t key = 0; key < 2000; ++key) {
      initial_row(row_init{kind, 1, 3}, 1, key, row.data(), 33);
      for (size_t j = 0; j < row.size(); ++j) {
        mean += row[j];
        square += double{row[j]} * row[j];
        n += 1;
      }
      for (size_t j = 0; j + 1 < row.size(); j += 2)
        cross += double{row[j]} * row[j + 1];
    }
    const bool truncated = kind == row_initializer::truncated_normal;
    BOOST_TEST_CONTEXT("truncated " << truncated) {
      BOOST_TEST(std::abs(mean / n) < 0.02);
      BOOST_TEST(std::abs(square / n - (truncated ? 0.774 : 1.0)) < 0.03);
      BOOST_TEST(std::abs(cross / (2000 * 16)) < 0.03);
    }
  }
  initial_row(row_init{row_initializer::zeros, 1, 1}, 1, 5, a.data(), 64);
  BOOST_TEST(std::all_of(a.begin(), a.end(), [](float v) { return v == 0; }));
}

BOOST_AUTO_TEST_SUITE_END()
