// A worker's step as one plain object (actors/worker/worker_step.hpp),
// without an actor, over a message path whose replies the test hands in: a
// dense step reading its own data; a step carrying an embedding table's
// rows (its keys pulled with the dense values, one request a shard;
// embedding.max-norm on the rows and through their gradients; rows pushed
// to every shard with the step's gradients); receipts combined into the
// report; a refused push reported not applied; a non-finite gradient
// pushing nothing.
#include <cmath>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/worker/worker_step.hpp"
#include "tests/support/held_requests.hpp"
#include "tests/support/step_events.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;

namespace {

// Requests wait for the test's answer, as replies wait in a mailbox.
struct fake_shards : troupe::testing::held_requests {
  // Answers every pull: each dense value as `shapes` says, filled with
  // `value`; each key's row [3 key, 4 key] (dim 2, norm 5 key).
  void answer_pulls(const std::vector<shape_t>& shapes, float value) {
    auto open = std::move(pulls);
    pulls.clear();
    for (auto& p : open) {
      pull_reply reply;
      for (size_t n = 0; n < p.request.names.size(); ++n)
        reply.values.push_back(tensor(shapes.at(n), value));
      for (auto& table : p.request.tables) {
        tensor rows({static_cast<int64_t>(table.keys.size()), 2});
        for (size_t k = 0; k < table.keys.size(); ++k) {
          rows.data()[2 * k] = 3.0f * static_cast<float>(table.keys[k]);
          rows.data()[2 * k + 1] = 4.0f * static_cast<float>(table.keys[k]);
        }
        reply.rows.push_back(std::move(rows));
      }
      p.done(reply, std::nullopt, std::nullopt);
    }
  }
  // Answers every push as taken, with the receipt 100 + the shard (or refused).
  void answer_pushes(maybe_failure refusal = std::nullopt) {
    auto open = std::move(pushes);
    pushes.clear();
    for (auto& p : open)
      p.done({1, 100 + static_cast<uint64_t>(p.shard)}, refusal, std::nullopt);
  }
};

struct step_fixture : troupe::testing::step_events {
  fake_shards shards;
  shard_exchange exchange{shards, std::chrono::seconds(5)};
};

// One variable "bias" [1] on shard 1 and table 0 (dim 2, 16 buckets) over
// two shards.
struct table_plan {
  std::vector<variable_spec> variables{{"bias", {1}, {}}};
  slice_router router{{{"bias", 1, 0, 0, 0, 1}}, variables, 2};
  table_setup table;
  table_plan() {
    table.table.name = "embedding";
    table.table.dim = 2;
    table.table.buckets = {16, 3};
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(worker_steps, step_fixture)

// The row path: the keys ride in the step's pull (the dense shard's request
// carries them beside its value, the other shard's request has rows only),
// the rows land on their keys, clipped to embedding.max-norm; the rows'
// gradients go back to every shard with the step's gradients, through the
// clip's backward pass, and the report shows both shards' receipts.
BOOST_AUTO_TEST_CASE(a_step_carries_a_tables_rows_with_its_dense_values) {
  table_plan plan;
  step_settings settings;
  settings.worker = 3;
  settings.max_norm = 1.0;
  worker_step step(exchange, "worker:3", settings, hooks());
  step.reset(7, plan.router, plan.variables, nullptr, {plan.table}, 2);
  BOOST_REQUIRE(step.tables() == 1u);
  std::vector<int64_t> ids{5, 9, 5, 12};
  step.rows(0).keys.assign(ids.data(), ids.size());
  step.begin({4, false, 0x77});
  BOOST_REQUIRE(shards.pulls.size() == 2u); // shard 1 (bias and rows), then shard 0
  BOOST_TEST(shards.pulls[0].shard == 1);
  BOOST_TEST(shards.pulls[0].request.names == (std::vector<std::string>{"bias"}));
  size_t keys = 0;
  for (auto& p : shards.pulls) {
    BOOST_REQUIRE(p.request.tables.size() == 1u);
    keys += p.request.tables[0].keys.size();
    for (auto key : p.request.tables[0].keys)
      BOOST_TEST(plan.table.table.shard_of(key, 2) == static_cast<uint32_t>(p.shard));
  }
  BOOST_TEST(keys == 3u); // the distinct keys, each pulled once
  shards.answer_pulls({{1}}, 0.5f);
  BOOST_REQUIRE(events == (std::vector<std::string>{"compute"}));
  auto& rows = step.rows(0);
  for (size_t k = 0; k < rows.keys.size(); ++k) { // clipped from norm 5 key to 1
    BOOST_TEST(rows.values[2 * k] == 0.6f, boost::test_tools::tolerance(1e-6f));
    BOOST_TEST(rows.values[2 * k + 1] == 0.8f, boost::test_tools::tolerance(1e-6f));
  }
  BOOST_TEST(step.params()[0][0] == 0.5f);
  // The caller's compute: a gradient along each clipped row is cut by the
  // clip's backward pass (the norm is held), one across it only scaled.
  step.grads()[0] = tensor({1}, 0.25f);
  rows.grads.assign(rows.values.size(), 0.0f);
  for (size_t k = 0; k < rows.keys.size(); ++k) {
    rows.grads[2 * k] = 0.6f;
    rows.grads[2 * k + 1] = 0.8f;
  }
  step.computed({0.5, 1, 4, -1});
  BOOST_REQUIRE(shards.pushes.size() == 2u);
  size_t pushed_keys = 0;
  for (auto& p : shards.pushes) {
    BOOST_TEST(p.push.step == 4);
    BOOST_TEST(p.push.worker == 3);
    BOOST_TEST(p.push.proof == 0x77u);
    BOOST_REQUIRE(p.push.tables.size() == 1u); // every shard, keys or none
    pushed_keys += p.push.tables[0].keys.size();
    for (size_t i = 0; i < p.push.tables[0].grads.size(); ++i)
      BOOST_TEST(std::abs(p.push.tables[0].grads[i]) < 1e-6f);
    BOOST_TEST(p.push.gradients.size() == (p.shard == 1 ? 1u : 0u));
  }
  BOOST_TEST(pushed_keys == 3u);
  shards.answer_pushes();
  BOOST_REQUIRE(reports.size() == 1u);
  BOOST_TEST(reports[0].applied);
  BOOST_TEST(reports[0].step == 4);
  BOOST_TEST(reports[0].run == 7u);
  BOOST_TEST(reports[0].receipt == (100u ^ 101u));
  BOOST_TEST(reports[0].loss == 0.5);
  BOOST_TEST(events.back() == "over");
}

// A shard refuses the step (its rows, say): the step is reported not
// applied, whole. A non-finite gradient pushes nothing.
BOOST_AUTO_TEST_CASE(a_refused_push_or_a_non_finite_gradient_is_no_applied_step) {
  table_plan plan;
  worker_step step(exchange, "worker:0", {}, hooks());
  step.reset(7, plan.router, plan.variables, nullptr, {plan.table}, 2);
  std::vector<int64_t> ids{5};
  step.rows(0).keys.assign(ids.data(), ids.size());
  step.begin({0, false, 1});
  shards.answer_pulls({{1}}, 0.5f);
  step.grads()[0] = tensor({1}, 0.25f);
  step.rows(0).grads.assign(2, 0.1f);
  step.computed({0.5, 0, 1, -1});
  shards.answer_pushes(failure{errc::invalid_request, "a key twice"});
  BOOST_REQUIRE(reports.size() == 1u);
  BOOST_TEST(!reports[0].applied);
  BOOST_TEST(reports[0].receipt == 0u);
  events.clear();
  step.begin({1, false, 2});
  shards.answer_pulls({{1}}, 0.5f);
  step.grads()[0] = tensor({1}, std::nanf(""));
  step.rows(0).grads.assign(2, 0.1f);
  step.computed({0.5, 0, 1, -1});
  BOOST_TEST(shards.pushes.empty());
  BOOST_TEST(events == (std::vector<std::string>{"compute", "nonfinite", "over"}),
             boost::test_tools::per_element());
}

// A dense model reading its own share: the batch is read once the values
// are in, and the report says where the next example lies.
BOOST_AUTO_TEST_CASE(a_dense_step_reads_its_own_data_and_reports_its_position) {
  auto data = testing::synthetic_data();
  auto net = make_model(model_kind::softmax);
  auto& vars = net->variables();
  std::vector<planned_slice> slices;
  for (size_t v = 0; v < vars.size(); ++v)
    slices.push_back({vars[v].name, 0, static_cast<int32_t>(v), 0, 0, vars[v].shape[0]});
  slice_router router(slices, vars, 1);
  stream_options options;
  options.batch_size = 8;
  options.shuffle = false;
  options.prefetch = 0;
  example_stream stream(data.train, options);
  worker_step step(exchange, "worker:0", {}, hooks());
  step.reset(9, router, vars, nullptr, {}, 1);
  step.read_from(&stream, net.get());
  step.begin({0, false, 3});
  BOOST_REQUIRE(shards.pulls.size() == 1u);
  BOOST_TEST(shards.pulls[0].request.tables.empty());
  std::vector<shape_t> shapes;
  for (auto& v : vars)
    shapes.push_back(v.shape);
  shards.answer_pulls(shapes, 0.0f);
  BOOST_REQUIRE(events == (std::vector<std::string>{"compute"}));
  BOOST_TEST(step.current().size() == 8u);
  auto stats = net->train_step(step.params(), step.current(), step.grads());
  step.computed(stats);
  shards.answer_pushes();
  BOOST_REQUIRE(reports.size() == 1u);
  BOOST_TEST(reports[0].applied);
  BOOST_TEST(reports[0].data_offset == 8u);
  BOOST_TEST(reports[0].share_count == 1);
  BOOST_TEST(reports[0].examples == 8u);
  BOOST_TEST(reports[0].receipt == 100u);
  BOOST_TEST(step.ask().step == -1);
}

BOOST_AUTO_TEST_SUITE_END()
