#include "actors/chief/run_report.hpp"
#include "tensor/core/json_writer.hpp"
#include "tensor/nn/metric.hpp"

#include <algorithm>
#include <cstdio>

namespace troupe {

namespace {

// The final line is read by people too: an error's line breaks become spaces.
std::string on_one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

void write_quality(json_writer& w, const training_result& r) {
  if (!r.evaluated) {
    w.key("test_accuracy").null().key("test_loss").null();
    w.key("reported").begin_object();
    for (auto& [name, value] : r.reported)
      w.key(name).number(value, "%.6g");
    w.end_object();
    return;
  }
  if (r.task == objective::regression) {
    w.key("task").string("regression").key("test_accuracy").null();
    w.key("test_loss").number(r.test_loss, "%.4f");
    w.key("test_rmse").number(rmse_of(r.test_loss), "%.4f");
  } else {
    w.key("test_accuracy").number(r.test_accuracy, "%.4f");
    w.key("test_loss").number(r.test_loss, "%.4f");
  }
  if (r.test_auc >= 0)
    w.key("test_auc").number(r.test_auc, "%.6f").key("test_logloss").number(r.test_logloss, "%.6f");
}

// Per shard: its part of the embedding table and the keys pushed most.
void write_tables(json_writer& w, const training_result& r) {
  w.begin_array();
  for (auto& s : r.traffic)
    for (auto& t : s.tables) {
      w.begin_object().key("shard").integer(s.shard).key("table").string(t.name);
      w.key("rows").integer(t.rows).key("bytes").integer(t.bytes);
      w.key("admitted").integer(t.admitted).key("evicted").integer(t.evicted);
      w.key("not_admitted").integer(t.not_admitted);
      w.key("keys_pulled").integer(s.keys_pulled).key("keys_pushed").integer(s.keys_pushed);
      w.key("hottest").begin_array();
      for (size_t i = 0; i < t.hottest_keys.size() && i < t.hottest_counts.size(); ++i)
        w.begin_array().integer(t.hottest_keys[i]).integer(t.hottest_counts[i]).end_array();
      w.end_array().end_object();
    }
  w.end_array();
}

void write_evaluations(json_writer& w, const training_result& r) {
  w.begin_array();
  for (auto& point : r.evaluations) {
    w.begin_object().key("step").integer(point.step);
    if (r.task == objective::regression)
      w.key("rmse").number(rmse_of(point.loss), "%.4f");
    else
      w.key("accuracy").number(point.accuracy, "%.4f");
    if (point.auc >= 0)
      w.key("auc").number(point.auc, "%.4f").key("logloss").number(point.logloss, "%.4f");
    w.key("loss").number(point.loss, "%.4f").end_object();
  }
  w.end_array();
}

} // namespace

std::string training_result::to_json() const {
  json_writer w;
  w.begin_object().key("event").string("final").key("ok").boolean(ok);
  w.key("mode").string(name_of(mode)).key("global_step").integer(global_step);
  write_quality(w, *this);
  w.key("examples_per_sec").number(examples_per_sec, "%.1f");
  w.key("wall_seconds").number(wall_seconds, "%.2f");
  w.key("examples").integer(examples).key("refused_steps").integer(refused_steps);
  w.key("dropped_gradients").integer(dropped_gradients).key("lost_workers").integer(lost_workers);
  w.key("left_workers").integer(left_workers).key("expired_leases").integer(expired_leases);
  w.key("ps_imbalance").number(ps_imbalance, "%.3f");
  // Refused, so the model holds none of them: ok stays true, and says so.
  uint64_t unauthorized = 0;
  for (auto& t : traffic)
    unauthorized += t.unauthorized_pushes;
  w.key("unauthorized_pushes").integer(unauthorized);
  // Steps applied already, pushed again: counted, not applied.
  uint64_t repeated = 0;
  for (auto& t : traffic)
    repeated += t.repeated_pushes;
  w.key("repeated_pushes").integer(repeated);
  if (!dropped_workers.empty()) {
    w.key("dropped_workers").begin_array();
    for (auto& why : dropped_workers)
      w.string(on_one_line(why));
    w.end_array();
  }
  if (preempted)
    w.key("preempted").boolean(true);
  if (!ok)
    w.key("error").string(on_one_line(error));
  if (!evaluations.empty()) {
    w.key("evaluations");
    write_evaluations(w, *this);
  }
  if (std::any_of(traffic.begin(), traffic.end(),
                  [](const shard_traffic& t) { return !t.tables.empty(); })) {
    w.key("embedding");
    write_tables(w, *this);
  }
  if (!data_json.empty())
    w.key("data").raw(data_json);
  return w.end_object().text();
}

std::string training_result::traffic_json() const {
  json_writer w;
  w.begin_object().key("event").string("traffic");
  w.key("ps_imbalance").number(ps_imbalance, "%f").key("shards").begin_array();
  for (auto& t : traffic) {
    w.begin_object().key("shard").integer(t.shard).key("bytes_held").integer(t.bytes_held);
    w.key("bytes_in").integer(t.bytes_in).key("bytes_out").integer(t.bytes_out);
    w.key("pulls").integer(t.pulls).key("pushes").integer(t.pushes);
    w.key("variables").begin_object();
    for (auto& v : t.variables) {
      w.key(v.name).begin_object().key("in").integer(v.bytes_in);
      w.key("out").integer(v.bytes_out).end_object();
    }
    w.end_object().end_object();
  }
  return w.end_array().end_object().text();
}

void summarize_traffic(training_result& result) {
  auto& t = result.traffic;
  std::sort(t.begin(), t.end(),
            [](const shard_traffic& a, const shard_traffic& b) { return a.shard < b.shard; });
  double total = 0, most = 0;
  for (auto& s : t) {
    auto io = static_cast<double>(s.bytes_in + s.bytes_out);
    total += io;
    most = std::max(most, io);
  }
  result.ps_imbalance = total > 0 && !t.empty() ? most / (total / t.size()) : 0;
}

std::vector<std::string> traffic_table(const training_result& result) {
  std::vector<std::string> out;
  double total = 0;
  for (auto& s : result.traffic)
    total += static_cast<double>(s.bytes_in + s.bytes_out);
  char line[160];
  std::snprintf(line, sizeof(line), "traffic per shard (%zu shard(s)):", result.traffic.size());
  out.emplace_back(line);
  out.emplace_back("  shard  variables  MB held      MB in     MB out   share");
  for (auto& s : result.traffic) {
    std::snprintf(line, sizeof(line), "  ps:%-3d %9zu %8.2f %10.1f %10.1f %6.1f%%", s.shard,
                  s.variables.size(), s.bytes_held / 1e6, s.bytes_in / 1e6, s.bytes_out / 1e6,
                  total > 0 ? 100.0 * static_cast<double>(s.bytes_in + s.bytes_out) / total : 0.0);
    out.emplace_back(line);
  }
  std::snprintf(line, sizeof(line), "  imbalance (max / mean of MB in + out): %.3f",
                result.ps_imbalance);
  out.emplace_back(line);
  return out;
}

} // namespace troupe
