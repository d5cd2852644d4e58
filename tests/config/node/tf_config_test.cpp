// TF_CONFIG (config/node/tf_config.hpp): the JSON seed 003 shows, with the
// older "master" job, and the ways a TF_CONFIG can be wrong.
#include <boost/test/unit_test.hpp>

#include "config/node/tf_config.hpp"

using namespace troupe;

namespace {

// Seed 003's cluster, as the Kubeflow operator would put it in TF_CONFIG.
const std::string seed_cluster = R"({
"master": [
"check-tf-config-master-34z8-0:2222"
],
"ps": [
"check-tf-config-ps-34z8-0:2222",
"check-tf-config-ps-34z8-1:2222"
],
"worker": [
"check-tf-config-worker-34z8-0:2222",
"check-tf-config-worker-34z8-1:2222"
]
})";

std::string with_task(const std::string& cluster, const std::string& task) {
  return "{\"cluster\": " + cluster + ", \"task\": " + task + ", \"environment\": \"cloud\"}";
}

std::string first_error(const std::string& text) {
  std::vector<std::string> errors;
  auto parsed = parse_tf_config(text, errors);
  BOOST_TEST(!parsed.has_value());
  return errors.empty() ? "no error" : errors.front();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tf_configs)

BOOST_AUTO_TEST_CASE(seed_003_with_a_master_job) {
  std::vector<std::string> errors;
  auto tf = parse_tf_config(with_task(seed_cluster, R"({"type": "master", "index": 0})"), errors);
  BOOST_REQUIRE(tf.has_value());
  BOOST_TEST(errors.empty());
  BOOST_TEST(tf->job == "chief");
  BOOST_TEST(tf->master_named);
  BOOST_TEST(tf->chief.at(0) == "check-tf-config-master-34z8-0:2222");
  BOOST_TEST(tf->ps.size() == 2u);
  BOOST_TEST(tf->worker.at(1) == "check-tf-config-worker-34z8-1:2222");
  tf = parse_tf_config(with_task(seed_cluster, R"({"type": "worker", "index": 1})"), errors);
  BOOST_REQUIRE(tf.has_value());
  BOOST_TEST(tf->job == "worker");
  BOOST_TEST(tf->index == 1);
  // Elastic membership: a worker beyond the list, below cluster.max-workers
  // (a StatefulSet scaled up past the replicas its pods list); never a ps.
  auto beyond = with_task(seed_cluster, R"({"type": "worker", "index": 3})");
  BOOST_TEST(!parse_tf_config(beyond, errors).has_value());
  errors.clear();
  tf = parse_tf_config(beyond, errors, 4);
  BOOST_REQUIRE(tf.has_value());
  BOOST_TEST(tf->index == 3);
  BOOST_TEST(
    !parse_tf_config(with_task(seed_cluster, R"({"type": "worker", "index": 4})"), errors, 4)
       .has_value());
  BOOST_TEST(!parse_tf_config(with_task(seed_cluster, R"({"type": "ps", "index": 3})"), errors, 4)
                .has_value());
}

BOOST_AUTO_TEST_CASE(malformed_and_inconsistent_configs_are_named) {
  BOOST_TEST(contains(first_error("{\"cluster\": "), "TF_CONFIG is not valid JSON"));
  BOOST_TEST(contains(first_error("[1, 2]"), "must be a JSON object"));
  BOOST_TEST(
    contains(first_error(R"({"task": {"type": "ps", "index": 0}})"), "\"cluster\" is missing"));
  BOOST_TEST(contains(first_error(with_task(seed_cluster, R"({"type": "ps", "index": 2})")),
                      "task ps:2 is not in the cluster (ps has 2 task(s))"));
  BOOST_TEST(contains(first_error(with_task(seed_cluster, R"({"type": "boss", "index": 0})")),
                      "task.type \"boss\" is not a job"));
  BOOST_TEST(contains(first_error(with_task(seed_cluster, R"({"type": "worker", "index": -1})")),
                      "task.index must be a non-negative integer"));
  BOOST_TEST(contains(first_error(with_task(seed_cluster, R"({"index": 0})")),
                      "task.type must be a string"));
  BOOST_TEST(
    contains(first_error(with_task(
               R"({"chief": ["a:1"], "master": ["b:1"], "ps": ["c:1"], "worker": ["d:1"]})",
               R"({"type": "ps", "index": 0})")),
             "both \"chief\" and \"master\""));
  BOOST_TEST(
    contains(first_error(with_task(R"({"chief": ["a:1", "b:1"], "ps": ["c:1"], "worker": ["d:1"]})",
                                   R"({"type": "ps", "index": 0})")),
             "must list exactly one task; it has 2"));
  BOOST_TEST(contains(first_error(with_task(R"({"chief": ["a:1"], "ps": "c:1", "worker": ["d:1"]})",
                                            R"({"type": "ps", "index": 0})")),
                      "cluster.ps must be a list"));
  BOOST_TEST(contains(
    first_error(with_task(R"({"chief": ["a:1"], "ps": ["c:1"], "worker": ["d:1"], "gpu": ["e:1"]})",
                          R"({"type": "ps", "index": 0})")),
    "cluster job \"gpu\" is not one Troupe runs"));
  std::vector<std::string> errors;
  auto evaluator = parse_tf_config(with_task(seed_cluster, R"({"type": "evaluator", "index": 0})"),
                                   errors);
  BOOST_REQUIRE(evaluator.has_value()); // it needs no address in the cluster
  BOOST_TEST(evaluator->job == "evaluator");
  BOOST_TEST(contains(first_error("{\"cluster\": " + seed_cluster
                                  + ", \"task\": {\"type\": \"ps\", \"index\": 0}, \"extra\": 1}"),
                      "unknown field \"extra\""));
}

BOOST_AUTO_TEST_SUITE_END()
