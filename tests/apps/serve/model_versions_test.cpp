// troupe-serve's versions (apps/serve/model_versions.hpp): readers that run
// while deltas are applied see one version whole, never rows or variables
// of two; a refused delta leaves the model served as it was until a newer
// base; a pinned version stays until follow; and the request rows of a
// Criteo model are laid out as training lays them out.
#define BOOST_TEST_MODULE serving
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <thread>

#include "apps/serve/model_versions.hpp"
#include "apps/serve/prediction_rows.hpp"
#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/data/sparse_lines.hpp"
#include "tensor/export/table_export.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::temp_dir;

namespace {

constexpr int64_t keys = 500;

// A serving directory of an fm model whose every row and variable holds
// the value of the version: a reader that sees two versions at once sees
// two values.
struct versions_on_disk {
  explicit versions_on_disk(std::string dir) : dir(std::move(dir)) {
    model_options o;
    o.keys = {criteo::dense_values, criteo::categorical_fields, 1};
    o.classes = 2;
    o.embedding_dim = 3;
    net = make_model(model_kind::fm, o);
    card = describe_model(model_kind::fm, *net, nullptr, 0);
    card.keys = o.keys;
    card.table_init = {row_initializer::normal, 0.1, 7};
  }

  std::vector<tensor> dense(float v) const {
    auto values = initial_values(*net, 1);
    for (auto& t : values)
      std::fill(t.data(), t.data() + t.size(), v);
    return values;
  }

  void base(int64_t version) {
    embedding_table_config config;
    config.name = "embedding";
    config.dim = card.table_dim();
    config.optimizer.kind = sparse_optimizer_kind::sgd;
    auto table = std::make_shared<embedding_table>(config);
    std::vector<float> row(card.table_dim(), static_cast<float>(version));
    for (int64_t k = 0; k < keys; ++k)
      table->restore(k, row.data(), {});
    card.step = version;
    write_base(dir, version, card, net->variables(), dense(float(version)),
               rows_of_table(table).get());
  }

  void delta(int64_t version, float value) {
    table_change change;
    for (int64_t k = 0; k < keys; ++k) {
      change.keys.push_back(k);
      change.values.insert(change.values.end(), card.table_dim(), value);
    }
    write_delta(dir, {version, version - 1, version}, change, card.table_dim(), net->variables(),
                dense(value));
  }

  std::string dir;
  std::unique_ptr<model> net;
  model_card card;
};

// Whether every row and variable of `m` holds its version's value.
bool whole(const served_model& m) {
  std::vector<int64_t> all(keys);
  for (int64_t k = 0; k < keys; ++k)
    all[static_cast<size_t>(k)] = k;
  std::vector<float> values(all.size() * m.model.table->dim());
  m.model.table->lookup(all.data(), all.size(), values.data());
  auto v = static_cast<float>(m.version);
  for (float x : values)
    if (x != v)
      return false;
  for (auto& t : m.model.params)
    for (size_t i = 0; i < t.size(); ++i)
      if (t.data()[i] != v)
        return false;
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(serving)

BOOST_AUTO_TEST_CASE(readers_see_one_version_whole_while_deltas_apply) {
  temp_dir d;
  versions_on_disk disk(d.file("serving"));
  disk.base(1);
  serve::model_versions versions(disk.dir);
  versions.refresh();
  BOOST_REQUIRE(versions.current());
  std::atomic<bool> done{false};
  std::atomic<int> mixed{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&] {
      while (!done) {
        auto m = versions.current();
        if (!whole(*m))
          ++mixed;
        ++reads;
      }
    });
  for (int64_t v = 2; v <= 40; ++v) {
    disk.delta(v, static_cast<float>(v));
    auto look = versions.refresh();
    BOOST_TEST(look.refused.empty());
  }
  done = true;
  for (auto& t : readers)
    t.join();
  BOOST_TEST(versions.current()->version == 40);
  BOOST_TEST(whole(*versions.current()));
  BOOST_TEST(mixed == 0);
  BOOST_TEST(reads > 40);
}

BOOST_AUTO_TEST_CASE(a_refused_delta_keeps_the_last_good_version_until_a_newer_base) {
  temp_dir d;
  versions_on_disk disk(d.file("serving"));
  disk.base(1);
  disk.delta(2, 2);
  serve::model_versions versions(disk.dir);
  versions.refresh();
  BOOST_TEST(versions.current()->version == 2);
  disk.delta(3, std::nanf(""));
  disk.delta(4, 4);
  auto look = versions.refresh();
  BOOST_REQUIRE(look.refused.size() == 1u);
  BOOST_TEST(
    contains(look.refused[0], "delta 3 (applies to version 2): a row's value is not finite"));
  BOOST_TEST(versions.current()->version == 2);
  BOOST_TEST(whole(*versions.current()));
  BOOST_TEST(versions.refresh().refused.empty()); // said once
  disk.base(5);
  versions.refresh();
  BOOST_TEST(versions.current()->version == 5);
  BOOST_TEST(whole(*versions.current()));
  // A server started on this directory loads the newest good version.
  serve::model_versions fresh(disk.dir);
  fresh.refresh();
  BOOST_TEST(fresh.current()->version == 5);
}

BOOST_AUTO_TEST_CASE(a_pinned_version_stays_until_follow) {
  temp_dir d;
  versions_on_disk disk(d.file("serving"));
  disk.base(1);
  for (int64_t v = 2; v <= 4; ++v)
    disk.delta(v, static_cast<float>(v));
  serve::model_versions versions(disk.dir);
  versions.refresh();
  versions.pin(2);
  BOOST_TEST(versions.current()->version == 2);
  BOOST_TEST(whole(*versions.current()));
  disk.delta(5, 5);
  versions.refresh();
  BOOST_TEST(versions.current()->version == 2);
  BOOST_TEST(contains(testing::message_of<troupe_error>([&] { versions.pin(9); }),
                      "reaches version 5, not 9"));
  BOOST_TEST(versions.current()->version == 2); // unchanged by the refusal
  versions.follow();
  versions.refresh();
  BOOST_TEST(versions.current()->version == 5);
  BOOST_TEST(whole(*versions.current()));
}

// A request's Criteo rows, with or without the label, are laid out as the
// training reader lays out the same line; rows of another shape are named.
BOOST_AUTO_TEST_CASE(request_rows_are_laid_out_as_training_reads_them) {
  versions_on_disk disk("unused");
  std::string fields = "1\t\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13";
  for (int c = 0; c < criteo::categorical_fields; ++c)
    fields += c == 5 ? "\t" : "\t0000abc" + std::to_string(c % 10);
  auto b = serve::read_rows(
    "{\"rows\": [" + json_string("1\t" + fields) + ", " + json_string(fields) + "]}", disk.card);
  BOOST_REQUIRE(b.size() == 2u);
  sparse_example example;
  parse_criteo_line("1\t" + fields, example);
  std::vector<float> expected(static_cast<size_t>(disk.card.keys.width()));
  lay_out_example(example, disk.card.keys, {}, expected.data());
  auto width = disk.card.keys.width();
  for (int64_t r = 0; r < 2; ++r)
    BOOST_TEST(std::equal(expected.begin(), expected.end(), b.images.data() + r * width));
  auto error = [&](const std::string& body) {
    return testing::message_of<serve::request_error>([&] { serve::read_rows(body, disk.card); });
  };
  BOOST_TEST(
    contains(error("{\"rows\": [[1, 2]]}"), "row 0: this model takes each row as a string"));
  BOOST_TEST(contains(error("{\"rows\": []}"), "1..65536 rows, not 0"));
  BOOST_TEST(contains(error("[1]"), "must be {\"rows\""));
  BOOST_TEST(contains(error("{\"rows\": [\"1\\t2\"]}"), "row 0: a Criteo line holds 40"));
}

// A dense model's rows are its features before normalisation: scaled as in
// training; its answer is every class's probability.
BOOST_AUTO_TEST_CASE(a_dense_models_rows_are_normalised_and_answered_per_class) {
  model_options o;
  o.input = {4};
  o.classes = 3;
  auto net = make_model(model_kind::softmax, o);
  auto card = describe_model(model_kind::softmax, *net, nullptr, 7);
  card.norm.kind = normalization::scale;
  card.norm.scale = 0.5f;
  auto b = serve::read_rows("{\"rows\": [[2, 4, 6, 8], [0, 0, 0, 1]]}", card);
  BOOST_REQUIRE(b.size() == 2u);
  BOOST_TEST(b.images.data()[3] == 4.0f);
  BOOST_TEST(b.images.data()[7] == 0.5f);
  auto error = [&](const std::string& body) {
    return testing::message_of<serve::request_error>([&] { serve::read_rows(body, card); });
  };
  BOOST_TEST(contains(error("{\"rows\": [[1, 2, 3]]}"), "an array of 4 numbers, not 3"));
  BOOST_TEST(contains(error("{\"rows\": [[1, 2, 3, null]]}"), "value 3 is not a finite number"));
  tensor outputs({2, 3});
  std::fill(outputs.data(), outputs.data() + 6, 0.0f);
  auto answer = serve::answer_json(card, outputs, 2, 4, 7);
  BOOST_TEST(answer
             == "{\"version\":4,\"step\":7,\"scores\":[[0.3333333,0.3333333,0.3333333],"
                "[0.3333333,0.3333333,0.3333333]]}");
}

BOOST_AUTO_TEST_SUITE_END()
