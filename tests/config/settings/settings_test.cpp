// The one validation of the settings, as the library API meets it: every
// problem named by its key, all of them at once; what the settings derive.
#include <algorithm>
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "config/settings/settings.hpp"

using namespace troupe;

namespace {

std::vector<std::string> problems(const training_settings& t, cluster_shape shape = {2, 2},
                                  const runtime_settings& r = {}) {
  std::vector<std::string> out;
  for (auto& f : check_settings(t, r, shape)) {
    BOOST_TEST((f.code == errc::invalid_setting));
    out.push_back(f.message);
  }
  return out;
}

bool names(const std::vector<std::string>& found, const std::string& part) {
  return std::any_of(found.begin(), found.end(),
                     [&](const std::string& f) { return f.find(part) != std::string::npos; });
}

} // namespace

BOOST_AUTO_TEST_SUITE(settings_tests)

BOOST_AUTO_TEST_CASE(defaults_are_valid) {
  BOOST_TEST(problems(training_settings{}).empty());
  BOOST_CHECK_NO_THROW(require_valid_settings({}, {}, {1, 1}));
}

BOOST_AUTO_TEST_CASE(every_problem_is_named_by_its_key) {
  training_settings t;
  t.batch_size = 0;
  t.last_step = -1;
  t.clip_norm = -1;
  t.placement_epsilon = 2;
  t.replicas_to_aggregate = 3;
  t.optimizer.learning_rate.base = -0.1;
  t.network.vgg_width = 5;
  runtime_settings r;
  r.request_timeout = std::chrono::milliseconds(0);
  auto found = problems(t, {2, 2}, r);
  BOOST_TEST(found.size() == 8u);
  for (auto key : {"train.batch-size", "train.last-step", "train.clip-norm",
                   "train.placement-epsilon", "train.replicas-to-aggregate = 3",
                   "train.learning-rate", "model.vgg-width", "cluster.request-timeout"})
    BOOST_TEST(names(found, key), key);
}

BOOST_AUTO_TEST_CASE(the_cluster_shape_is_checked_with_the_settings) {
  training_settings t;
  BOOST_TEST(names(problems(t, {0, 2}), "cluster.ps is empty"));
  BOOST_TEST(names(problems(t, {1, 0}), "cluster.worker is empty"));
  t.worker_batch_sizes = {100, 200, 300};
  t.worker_devices = {gpu::device_spec{}, gpu::device_spec{}, gpu::device_spec{}};
  auto found = problems(t, {1, 2});
  BOOST_TEST(names(found, "train.worker-batch-sizes lists 3 sizes for 2 worker(s)"));
  BOOST_TEST(names(found, "train.worker-devices lists 3 devices"));
  t = {};
  t.total_num_replicas = 3;
  BOOST_TEST(names(problems(t, {1, 2}), "train.total-num-replicas = 3"));
}

BOOST_AUTO_TEST_CASE(ssp_needs_a_staleness_in_range) {
  training_settings t;
  t.mode = update_mode::ssp;
  t.staleness = -1;
  BOOST_TEST(names(problems(t), "train.staleness = -1 is outside 0..1000000"));
  t.staleness = 0;
  BOOST_TEST(problems(t).empty());
  t.mode = update_mode::async;
  t.staleness = -1; // ignored outside ssp
  BOOST_TEST(problems(t).empty());
}

BOOST_AUTO_TEST_CASE(wire_precision_and_push_topk_are_checked_and_dense_only) {
  training_settings t;
  t.wire_precision = wire_precision::bf16;
  BOOST_TEST(problems(t).empty());
  t.wire_precision = static_cast<wire_precision>(5); // the library API's cast
  BOOST_TEST(names(problems(t), "train.wire-precision must be one of fp32, bf16, fp16"));
  t.wire_precision = wire_precision::fp32;
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    t.push_topk = bad;
    BOOST_TEST(names(problems(t), "train.push-topk must be 0 (off) or the fraction"));
  }
  t.push_topk = 0.01;
  BOOST_TEST(problems(t).empty());
  t.model = model_kind::fm;
  BOOST_TEST(names(problems(t), "train.push-topk applies to dense models"));
  t.push_topk = 0;
  t.wire_precision = wire_precision::fp16;
  BOOST_TEST(names(problems(t), "train.wire-precision = \"fp16\" applies to dense models; "
                                "model fm moves its rows at fp32"));
}

BOOST_AUTO_TEST_CASE(report_every_is_bounded_and_async_only) {
  training_settings t;
  for (int32_t bad : {0, -3, 1025}) {
    t.report_every = bad;
    BOOST_TEST(names(problems(t), "is outside 1..1024 (steps a worker reports at a time)"));
  }
  t.report_every = 64;
  BOOST_TEST(problems(t).empty());
  for (auto mode : {update_mode::sync, update_mode::ssp}) {
    t.mode = mode;
    BOOST_TEST(names(problems(t), "train.report-every works in async mode only"));
  }
  t.report_every = 1;
  BOOST_TEST(problems(t).empty());
}

BOOST_AUTO_TEST_CASE(a_fixed_size_table_needs_its_vocabulary_and_no_admission_or_eviction) {
  training_settings t;
  t.model = model_kind::fm;
  t.embedding.kind = table_kind::fixed;
  BOOST_TEST(names(problems(t), "needs embedding.vocabulary"));
  t.embedding.vocabulary = {100, 0};
  BOOST_TEST(names(problems(t), "embedding.vocabulary[1] = 0"));
  t.embedding.vocabulary = {100, 50};
  BOOST_TEST(!names(problems(t), "embedding")); // (fm without data: its own problem)
  t.embedding.evict_after_steps = 5;
  BOOST_TEST(names(problems(t), "apply to hash tables"));
  t.embedding.evict_after_steps = 0;
  auto setup = table_setup_of(t.embedding, {"embedding", 9}, 1);
  BOOST_TEST((setup.table.kind == table_kind::fixed));
  BOOST_TEST(setup.table.rows == 150);
  BOOST_TEST(model_options_of(t).vocabulary == (std::vector<int64_t>{100, 50}),
             boost::test_tools::per_element());
  t.embedding.kind = table_kind::hash;
  BOOST_TEST(names(problems(t), "embedding.vocabulary applies to embedding.kind = \"fixed\""));
}

BOOST_AUTO_TEST_CASE(models_and_partitioner_rules_must_fit) {
  training_settings t;
  t.partitioners = parse_partition_rules({"softmax/* fixed_size shards=2 axis=1"});
  BOOST_TEST(names(problems(t), "softmax/biases has shape [10], no axis 1"));
  t = {};
  t.model = model_kind::custom;
  t.network.layers = {"dense units=7"};
  BOOST_TEST(names(problems(t), "10 units"));
  // The library API refuses the same settings, naming every problem.
  t.batch_size = 0;
  try {
    require_valid_settings(t, {}, {1, 1});
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    std::string what = e.what();
    BOOST_TEST(what.find("10 units") != std::string::npos, what);
    BOOST_TEST(what.find("train.batch-size") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(derived_values) {
  training_settings t;
  BOOST_TEST(replicas_of(t, {1, 3}) == 3); // R = N by default
  t.replicas_to_aggregate = 2;
  BOOST_TEST(replicas_of(t, {1, 3}) == 2);
  t.epochs = 2;
  t.batch_size = 100;
  BOOST_TEST(last_step_for_epochs(t, {1, 3}, 1000) == 20); // async: one batch per update
  t.mode = update_mode::sync;
  BOOST_TEST(last_step_for_epochs(t, {1, 3}, 1000) == 10); // sync: R batches per update
  t.worker_batch_sizes = {100, 300, 200};
  t.mode = update_mode::async;
  BOOST_TEST(last_step_for_epochs(t, {1, 3}, 1000) == 10); // the mean batch: 200
  t.epochs = 0.0001;
  BOOST_TEST(last_step_for_epochs(t, {1, 3}, 1000) == 1); // at least one step
  t.epochs = 1e6; // 1e6 passes over 1e9 examples in batches of 200: too many steps
  BOOST_CHECK_THROW(last_step_for_epochs(t, {1, 3}, 1'000'000'000), troupe_error);
  t.epochs = 0.0001;
  BOOST_TEST(batch_size_of(t, 1) == 300);
  t.worker_devices = {gpu::parse_device("cuda:1")};
  BOOST_TEST(device_of(t, 0).to_string() == "cuda:1");
  BOOST_TEST(device_of(t, 1).to_string() == "cpu");
}

BOOST_AUTO_TEST_CASE(enum_names_round_trip) {
  BOOST_TEST(name_list<update_mode>() == "async, sync, ssp");
  BOOST_TEST(name_list<worker_loss_policy>() == "shrink, wait");
  BOOST_TEST(name_list<placement_strategy>() == "round_robin, greedy_bytes, balanced");
  BOOST_TEST((enum_from_name<update_mode>("sync") == update_mode::sync));
  BOOST_TEST(!enum_from_name<update_mode>("Sync"));
  BOOST_TEST(std::string(name_of(worker_loss_policy::wait)) == "wait");
  BOOST_TEST(closest_match("softmx", {"softmax", "mlp"}) == "softmax");
  BOOST_TEST(closest_match("zzzzzz", {"softmax", "mlp"}).empty());
}

// Delta exports and a run without end: in range, named by their keys.
BOOST_AUTO_TEST_CASE(delta_exports_and_an_unbounded_run_are_checked) {
  training_settings t;
  t.last_step = 0; // until stopped
  BOOST_TEST(problems(t).empty());
  t.last_step = -1;
  BOOST_TEST(names(problems(t), "train.last-step = -1 is out of range"));
  t.last_step = 100;
  t.checkpoint.delta_interval = std::chrono::milliseconds(10000);
  BOOST_TEST(names(problems(t), "export.delta-interval needs checkpoint.log-dir"));
  t.checkpoint.log_dir = "logs";
  BOOST_TEST(problems(t).empty());
  t.checkpoint.delta_interval = std::chrono::milliseconds(10);
  BOOST_TEST(names(problems(t), "export.delta-interval = 10ms is out of range"));
  t.checkpoint.delta_interval = std::chrono::milliseconds(10000);
  t.checkpoint.base_every = 0;
  BOOST_TEST(names(problems(t), "export.base-every = 0 is out of range"));
}

BOOST_AUTO_TEST_SUITE_END()
