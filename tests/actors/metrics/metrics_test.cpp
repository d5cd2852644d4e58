// The process's metrics: what Prometheus reads (names, labels, types,
// cumulative buckets) and what the chief publishes of its run.
#define BOOST_TEST_MODULE metrics
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actors/chief/run_metrics.hpp"
#include "actors/metrics/registry.hpp"
#include "actors/metrics/task_metrics.hpp"

using namespace troupe;
using namespace troupe::metrics;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(counters_and_gauges_render_with_help_type_and_labels) {
  registry r;
  r.get_counter("troupe_pushes_total", "pushes", {{"shard", "0"}}).add(3);
  r.get_counter("troupe_pushes_total", "pushes", {{"shard", "1"}}).add();
  r.get_gauge("troupe_loss", "loss").set(0.25);
  auto text = r.render();
  BOOST_TEST(has_line(text, "# HELP troupe_pushes_total pushes"));
  BOOST_TEST(has_line(text, "# TYPE troupe_pushes_total counter"));
  BOOST_TEST(has_line(text, "troupe_pushes_total{shard=\"0\"} 3"));
  BOOST_TEST(has_line(text, "troupe_pushes_total{shard=\"1\"} 1"));
  BOOST_TEST(has_line(text, "# TYPE troupe_loss gauge"));
  BOOST_TEST(has_line(text, "troupe_loss 0.25"));
  // One HELP and TYPE a family, however many label sets.
  BOOST_TEST(text.find("# TYPE troupe_pushes_total") == text.rfind("# TYPE troupe_pushes_total"));
}

BOOST_AUTO_TEST_CASE(the_same_name_and_labels_give_the_same_metric) {
  registry r;
  auto& a = r.get_counter("x_total", "x", {{"a", "1"}});
  auto& b = r.get_counter("x_total", "x", {{"a", "1"}});
  auto& c = r.get_counter("x_total", "x", {{"a", "2"}});
  BOOST_TEST(&a == &b);
  BOOST_TEST(&a != &c);
}

BOOST_AUTO_TEST_CASE(histograms_count_cumulatively_with_sum_and_count) {
  registry r;
  auto& h = r.get_histogram("troupe_pull_duration_seconds", "pulls", {0.001, 0.01, 0.1},
                            {{"worker", "0"}});
  for (double v : {0.0005, 0.001, 0.005, 0.05, 3.0})
    h.observe(v);
  auto text = r.render();
  BOOST_TEST(has_line(text, "# TYPE troupe_pull_duration_seconds histogram"));
  // The bound itself falls in its bucket (le: less or equal).
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_bucket{worker=\"0\",le=\"0.001\"} 2"));
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_bucket{worker=\"0\",le=\"0.01\"} 3"));
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_bucket{worker=\"0\",le=\"0.1\"} 4"));
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_bucket{worker=\"0\",le=\"+Inf\"} 5"));
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_count{worker=\"0\"} 5"));
  BOOST_TEST(has_line(text, "troupe_pull_duration_seconds_sum{worker=\"0\"} 3.0565"));
  BOOST_CHECK_THROW(histogram({0.1, 0.1}), std::logic_error);
}

BOOST_AUTO_TEST_CASE(label_values_are_escaped_and_names_checked) {
  registry r;
  r.get_gauge("g", "a gauge", {{"path", "a\"b\\c\nd"}}).set(1);
  BOOST_TEST(has_line(r.render(), "g{path=\"a\\\"b\\\\c\\nd\"} 1"));
  BOOST_CHECK_THROW(r.get_gauge("9lives", "bad"), std::logic_error);
  BOOST_CHECK_THROW(r.get_gauge("a-b", "bad"), std::logic_error);
  // A name keeps its kind.
  r.get_counter("c_total", "c");
  BOOST_CHECK_THROW(r.get_gauge("c_total", "c"), std::logic_error);
}

BOOST_AUTO_TEST_CASE(callback_gauges_are_read_at_each_render) {
  registry r;
  double value = 1;
  r.set_callback_gauge("now", "read at scrape", [&value] { return value; });
  BOOST_TEST(has_line(r.render(), "now 1"));
  value = 2;
  BOOST_TEST(has_line(r.render(), "now 2"));
  auto values = r.gauge_values("now");
  BOOST_TEST(values.size() == 1u);
  BOOST_TEST(values[0].second == 2);
}

BOOST_AUTO_TEST_CASE(updates_from_many_threads_all_count) {
  registry r;
  auto& c = r.get_counter("n_total", "n");
  auto& g = r.get_gauge("sum", "s");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.add();
        g.add(0.5);
      }
    });
  for (auto& t : threads)
    t.join();
  BOOST_TEST(c.value() == 40000u);
  BOOST_TEST(g.value() == 20000.0);
}

BOOST_AUTO_TEST_CASE(the_global_steps_time_moves_only_with_the_step) {
  registry r;
  run_metrics m{r};
  run_counts c;
  c.global_step = 10;
  c.examples = 640;
  m.publish(c, 1000.0);
  m.publish(c, 1005.0); // stuck: the timestamp stays
  auto text = r.render();
  BOOST_TEST(has_line(text, "troupe_global_step 10"));
  BOOST_TEST(has_line(text, "troupe_global_step_timestamp_seconds 1000"));
  c.global_step = 11;
  c.examples = 704;
  m.publish(c, 1010.0);
  text = r.render();
  BOOST_TEST(has_line(text, "troupe_global_step_timestamp_seconds 1010"));
  BOOST_TEST(has_line(text, "troupe_examples_total 704"));
}

BOOST_AUTO_TEST_CASE(counters_never_go_back_when_the_run_restarts_its_counts) {
  registry r;
  run_metrics m{r};
  run_counts c;
  c.examples = 500;
  c.lost_workers = 2;
  m.publish(c, 1);
  c.examples = 100; // a recovered run counting again
  c.lost_workers = 0;
  m.publish(c, 2);
  c.examples = 150;
  m.publish(c, 3);
  auto text = r.render();
  BOOST_TEST(has_line(text, "troupe_examples_total 550"));
  BOOST_TEST(has_line(text, "troupe_lost_workers_total 2"));
}

BOOST_AUTO_TEST_CASE(evaluations_publish_only_the_figures_they_have) {
  registry r;
  run_metrics m{r};
  m.evaluated(300, 0.8, 0.5, -1, -1);
  auto text = r.render();
  BOOST_TEST(has_line(text, "troupe_evaluation{metric=\"accuracy\"} 0.8"));
  BOOST_TEST(text.find("metric=\"auc\"") == std::string::npos);
  m.evaluated(400, 0.7, 0.6, 0.75, 0.45);
  text = r.render();
  BOOST_TEST(has_line(text, "troupe_evaluation{metric=\"auc\"} 0.75"));
  BOOST_TEST(has_line(text, "troupe_evaluation_step 400"));
}
