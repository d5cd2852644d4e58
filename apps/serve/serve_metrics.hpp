#pragma once
// troupe-serve's metrics, every name and help once (docs/online.md#metrics).
#include <string>

#include "actors/metrics/registry.hpp"

namespace troupe::serve {

struct serve_metrics {
  metrics::histogram& predict_seconds;
  metrics::counter& predictions;
  metrics::counter& deltas_applied;
  metrics::counter& deltas_refused;
  metrics::gauge& last_update; ///< when the model served last changed (Unix seconds)

  explicit serve_metrics(metrics::registry& r)
    : predict_seconds(r.get_histogram("troupe_serve_predict_seconds",
                                      "Seconds from a prediction request read to its answer",
                                      metrics::latency_buckets())),
      predictions(r.get_counter("troupe_serve_predictions_total", "Rows predicted")),
      deltas_applied(
        r.get_counter("troupe_serve_deltas_applied_total", "Deltas applied to the model served")),
      deltas_refused(r.get_counter("troupe_serve_deltas_refused_total",
                                   "Deltas (or bases) refused: damaged, a version missing, a value "
                                   "not finite")),
      last_update(r.get_gauge("troupe_serve_last_update_timestamp_seconds",
                              "When the model served last changed version, Unix seconds")) {}

  /// The requests answered on `path` with `code`.
  static metrics::counter& requests(metrics::registry& r, const std::string& path, int code) {
    return r.get_counter("troupe_serve_requests_total", "HTTP requests answered, by path and code",
                         {{"path", path}, {"code", std::to_string(code)}});
  }
};

} // namespace troupe::serve
