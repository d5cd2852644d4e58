#include "actors/chief/run_report.hpp"
#include "tensor/nn/metric.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe {

namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  return out + "\"";
}

} // namespace

std::string training_result::to_json() const {
  char quality[160];
  if (task == objective::regression)
    std::snprintf(quality, sizeof(quality),
                  "\"task\":\"regression\",\"test_accuracy\":null,\"test_loss\":%.4f,"
                  "\"test_rmse\":%.4f",
                  test_loss, rmse_of(test_loss));
  else
    std::snprintf(quality, sizeof(quality), "\"test_accuracy\":%.4f,\"test_loss\":%.4f",
                  test_accuracy, test_loss);
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                "{\"event\":\"final\",\"ok\":%s,\"mode\":\"%s\",\"global_step\":%lld,"
                "%s,\"examples_per_sec\":%.1f,"
                "\"wall_seconds\":%.2f,\"examples\":%llu,\"refused_steps\":%lld,"
                "\"dropped_gradients\":%llu,\"lost_workers\":%llu,\"ps_imbalance\":%.3f",
                ok ? "true" : "false", name_of(mode), static_cast<long long>(global_step), quality,
                examples_per_sec, wall_seconds, static_cast<unsigned long long>(examples),
                static_cast<long long>(refused_steps),
                static_cast<unsigned long long>(dropped_gradients),
                static_cast<unsigned long long>(lost_workers), ps_imbalance);
  std::string out = buf;
  // Refused, so the model holds none of them: ok stays true, and says so.
  uint64_t unauthorized = 0;
  for (auto& t : traffic)
    unauthorized += t.unauthorized_pushes;
  out += ",\"unauthorized_pushes\":" + std::to_string(unauthorized);
  if (preempted)
    out += ",\"preempted\":true";
  if (!ok)
    out += ",\"error\":" + json_string(error);
  if (!evaluations.empty()) {
    out += ",\"evaluations\":[";
    for (size_t i = 0; i < evaluations.size(); ++i) {
      char point[128];
      if (task == objective::regression)
        std::snprintf(point, sizeof(point), "%s{\"step\":%lld,\"rmse\":%.4f,\"loss\":%.4f}",
                      i ? "," : "", static_cast<long long>(evaluations[i].step),
                      rmse_of(evaluations[i].loss), evaluations[i].loss);
      else
        std::snprintf(point, sizeof(point), "%s{\"step\":%lld,\"accuracy\":%.4f,\"loss\":%.4f}",
                      i ? "," : "", static_cast<long long>(evaluations[i].step),
                      evaluations[i].accuracy, evaluations[i].loss);
      out += point;
    }
    out += "]";
  }
  if (!data_json.empty())
    out += ",\"data\":" + data_json;
  return out + "}";
}

std::string training_result::traffic_json() const {
  std::string out = "{\"event\":\"traffic\",\"ps_imbalance\":" + std::to_string(ps_imbalance)
                    + ",\"shards\":[";
  for (size_t i = 0; i < traffic.size(); ++i) {
    auto& t = traffic[i];
    out += std::string(i ? "," : "") + "{\"shard\":" + std::to_string(t.shard) + ",\"bytes_held\":"
           + std::to_string(t.bytes_held) + ",\"bytes_in\":" + std::to_string(t.bytes_in)
           + ",\"bytes_out\":" + std::to_string(t.bytes_out)
           + ",\"pulls\":" + std::to_string(t.pulls) + ",\"pushes\":" + std::to_string(t.pushes)
           + ",\"variables\":{";
    for (size_t v = 0; v < t.variables.size(); ++v)
      out += std::string(v ? "," : "") + json_string(t.variables[v].name)
             + ":{\"in\":" + std::to_string(t.variables[v].bytes_in)
             + ",\"out\":" + std::to_string(t.variables[v].bytes_out) + "}";
    out += "}}";
  }
  return out + "]}";
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
