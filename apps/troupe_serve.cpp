// troupe-serve DIR: answers predictions over HTTP from a model's serving
// directory (export.delta-interval; tensor/export/delta_export.hpp) or an
// export directory, and moves forward with each delta the chief writes,
// atomically (apps/serve/model_versions.hpp). docs/online.md.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <string>

#include <pthread.h>
#include <sched.h>

#include "actors/metrics/task_metrics.hpp"
#include "apps/model_tools.hpp"
#include "apps/serve/serve_endpoint.hpp"
#include "apps/serve/serve_metrics.hpp"

using namespace troupe;

namespace {

void say(const std::string& line) {
  char stamp[32];
  auto now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::gmtime(&now));
  std::fprintf(stderr, "[%s] troupe-serve: %s\n", stamp, line.c_str());
}

int64_t number_option(const tools::command_line& cl, const std::string& key, int64_t fallback,
                      int64_t low, int64_t high) {
  auto text = cl.option(key);
  if (text.empty())
    return fallback;
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < low || value > high)
    throw data_error("--" + key + "=" + text + ": use a whole number in " + std::to_string(low)
                     + ".." + std::to_string(high));
  return value;
}

// One look at the directory, logged and counted.
void refresh(serve::model_versions& versions, serve::serve_metrics& counters) {
  try {
    auto look = versions.refresh();
    for (auto& line : look.applied) {
      say("serving " + line);
      counters.deltas_applied.add(line.rfind("delta", 0) == 0 ? 1 : 0);
    }
    if (!look.applied.empty())
      counters.last_update.set(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    for (auto& line : look.refused) {
      say("refused, still serving version "
          + std::to_string(versions.current() ? versions.current()->version : -1) + ": " + line);
      counters.deltas_refused.add();
    }
  } catch (const std::exception& e) {
    static std::string last;
    if (e.what() != last) // waiting for a first version: said once
      say(std::string("no model to serve yet: ") + e.what());
    last = e.what();
  }
}

} // namespace

int main(int argc, char** argv) {
  const std::string usage =
    "usage: troupe-serve DIR [--port=8500] [--address=127.0.0.1] [--threads=4]\n"
    "                    [--poll-ms=500] [--max-body=67108864] [--read-timeout=5]\n"
    "  DIR           a serving directory (<log-dir>/serving, written by a chief with\n"
    "                export.delta-interval) or an export directory (model.json)\n"
    "  --port        the HTTP port (0: any free one; the address is printed)\n"
    "  --poll-ms     how often the directory is read for new deltas\n"
    "  --max-body    the largest request body, in bytes (larger: 413, unread)\n"
    "  --read-timeout  seconds a connection may stay silent\n"
    "  POST /v1/predict {\"rows\": [...]}; GET /v1/version; POST /v1/rollback?version=V;\n"
    "  POST /v1/follow; GET /healthz, /readyz, /metrics (docs/online.md)\n";
  auto cl = tools::parse_command_line(
    argc, argv, {"port", "address", "threads", "poll-ms", "max-body", "read-timeout"}, usage, 1);
  // SIGTERM and SIGINT are waited for below, not delivered to a thread.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  return tools::run_tool("troupe-serve", [&] {
    serve::serve_settings settings;
    settings.port = static_cast<uint16_t>(number_option(cl, "port", 8500, 0, 65535));
    settings.address = cl.option("address").empty() ? "127.0.0.1" : cl.option("address");
    settings.threads = static_cast<size_t>(number_option(cl, "threads", 4, 1, 256));
    settings.max_body = static_cast<size_t>(
      number_option(cl, "max-body", int64_t{64} << 20, 1024, int64_t{1} << 30));
    settings.read_timeout = std::chrono::seconds(number_option(cl, "read-timeout", 5, 1, 600));
    auto poll = number_option(cl, "poll-ms", 500, 10, 60000);
    auto& registry = metrics::process_registry();
    metrics::add_process_metrics(registry);
    serve::serve_metrics counters(registry);
    serve::model_versions versions(cl.positional[0]);
    refresh(versions, counters);
    std::unique_ptr<serve::serve_endpoint> endpoint;
    try {
      endpoint = std::make_unique<serve::serve_endpoint>(settings, versions, registry);
    } catch (const std::runtime_error& e) {
      say(e.what());
      return tools::exit_failure;
    }
    // Deltas are applied on this thread, which runs only when a core is
    // free of the server's threads (SCHED_IDLE): answers keep their
    // latency while a large delta loads (bench/online: p99 1.22x with
    // deltas of 10^5 rows back to back on 2 cores, 1.74x at nice 10). A
    // server busy on every core applies later.
    sched_param none{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
    std::printf("{\"event\":\"serving\",\"url\":\"%s\",\"dir\":\"%s\"}\n", endpoint->url().c_str(),
                cl.positional[0].c_str());
    std::fflush(stdout);
    timespec wait{poll / 1000, (poll % 1000) * 1000000};
    for (;;) {
      int got = sigtimedwait(&stops, nullptr, &wait);
      if (got == SIGTERM || got == SIGINT) {
        say(std::string("stopped by ") + (got == SIGTERM ? "SIGTERM" : "SIGINT"));
        return tools::exit_ok;
      }
      refresh(versions, counters);
    }
  });
}
