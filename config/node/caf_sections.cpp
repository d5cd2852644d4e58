#include "config/node/caf_sections.hpp"

#include <chrono>

#include <caf/atom.hpp>
#include <caf/config_value.hpp>
#include <caf/settings.hpp>

namespace troupe {

namespace {

using namespace std::chrono_literals;

struct count_range {
  const char* key;
  int64_t min;
  int64_t max;
};

// Counts CAF divides by or loops on.
constexpr count_range counts[] = {
  {"scheduler.max-threads", 1, 512},
  {"scheduler.max-throughput", 1, 1'000'000'000},
  {"work-stealing.aggressive-poll-attempts", 1, 1'000'000},
  {"work-stealing.aggressive-steal-interval", 1, 1'000'000},
  {"work-stealing.moderate-poll-attempts", 1, 1'000'000},
  {"work-stealing.moderate-steal-interval", 1, 1'000'000},
  {"work-stealing.relaxed-steal-interval", 1, 1'000'000},
  {"middleman.max-consecutive-reads", 1, 1'000'000},
  {"middleman.workers", 0, 64},
};

struct duration_range {
  const char* key;
  caf::timespan min;
  caf::timespan max;
};

// 0 for the heartbeat keys means Troupe's defaults (1s, 10s).
constexpr duration_range durations[] = {
  {"work-stealing.moderate-sleep-duration", caf::timespan{0}, caf::timespan{1s}},
  {"work-stealing.relaxed-sleep-duration", caf::timespan{0}, caf::timespan{1s}},
  {"middleman.heartbeat-interval", caf::timespan{10ms}, caf::timespan{1min}},
  {"middleman.connection-timeout", caf::timespan{100ms}, caf::timespan{1h}},
};

std::string text(caf::timespan t) {
  return caf::to_string(caf::config_value{t});
}

} // namespace

void check_caf_sections(const node_config& cfg, std::vector<std::string>& errors) {
  auto& content = caf::content(cfg);
  for (auto& r : counts) {
    auto* value = caf::get_if(&content, std::string(r.key));
    if (!value)
      continue;
    auto* n = caf::get_if<caf::config_value::integer>(value);
    if (n && *n >= r.min && *n <= r.max)
      continue;
    errors.push_back(std::string(r.key) + " = " + caf::to_string(*value) + " is out of range; use "
                     + std::to_string(r.min) + ".." + std::to_string(r.max));
  }
  for (auto& r : durations) {
    auto* value = caf::get_if(&content, std::string(r.key));
    auto* t = value ? caf::get_if<caf::timespan>(value) : nullptr;
    if (!t || t->count() == 0 || (*t >= r.min && *t <= r.max))
      continue;
    errors.push_back(std::string(r.key) + " = " + text(*t) + " is out of range; use " + text(r.min)
                     + " to " + text(r.max));
  }
  // As troupe-node applies them: 0 or unset means 1s and 10s.
  auto heartbeat = caf::get_or(content, "middleman.heartbeat-interval", caf::timespan{0});
  auto timeout = caf::get_or(content, "middleman.connection-timeout", caf::timespan{0});
  if (heartbeat.count() == 0)
    heartbeat = caf::timespan{1s};
  if (timeout.count() == 0)
    timeout = caf::timespan{10s};
  if (timeout < 3 * heartbeat)
    errors.push_back("middleman.connection-timeout = " + text(timeout)
                     + " must be at least 3 x middleman.heartbeat-interval (" + text(heartbeat)
                     + "), or one late heartbeat drops a healthy peer");
  auto choice = [&](const char* key, std::initializer_list<const char*> allowed) {
    auto* value = caf::get_if(&content, std::string(key));
    if (!value)
      return;
    auto rendered = caf::to_string(*value);
    for (auto a : allowed)
      if (auto* atom = caf::get_if<caf::atom_value>(value); atom && caf::to_string(*atom) == a)
        return;
    std::string names;
    for (auto a : allowed)
      names += (names.empty() ? "" : ", ") + std::string("'") + a + "'";
    errors.push_back(std::string(key) + " = " + rendered + " is not supported; use " + names);
  };
  choice("scheduler.policy", {"stealing", "sharing"});
  choice("middleman.network-backend", {"default"});
}

} // namespace troupe
