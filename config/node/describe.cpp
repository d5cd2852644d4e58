// --help and --dump-config: the node's configuration as text.
#include <cstdio>
#include <set>
#include <sstream>

#include <caf/config_value.hpp>

#include "config/node/ini_checks.hpp"
#include "config/node/node_config.hpp"

namespace troupe {

namespace {

// The sections --help lists; CAF's own keys are documented in docs/config.md.
const std::set<std::string> troupe_categories{"cluster", "train", "model", "metrics", "export"};

} // namespace

std::string help_text(const node_config& cfg) {
  std::ostringstream out;
  out << "troupe-node: one Troupe task (PS shard, worker, chief or evaluator), or a whole "
         "cluster.\n\n"
         "usage:\n"
         "  troupe-node                               whole cluster in this process "
         "(embedded defaults,\n"
         "                                            or caf-application.conf if present)\n"
         "  troupe-node --job_name=JOB --task_index=N [--config-file=FILE]\n"
         "  TF_CONFIG='{...}' troupe-node [--config-file=FILE]   the cluster and task from "
         "TF_CONFIG\n"
         "  troupe-node --dump-config                 print the effective configuration\n\n"
         "Every key can be set in the config file ([section] key = value, INI syntax) or on\n"
         "the command line as --section.key=value. Keys:\n";
  for (auto& opt : cfg.options()) {
    auto category = ini::str(opt.category());
    if (!troupe_categories.count(category) && ini::str(opt.long_name()) != "job_name"
        && ini::str(opt.long_name()) != "task_index")
      continue;
    auto value = opt.get();
    out << "  " << (category == "global" ? ini::str(opt.long_name()) : ini::str(opt.full_name()))
        << " (" << opt.type_name() << ", default " << (value ? caf::to_string(*value) : "-")
        << ")\n      " << opt.description() << "\n";
  }
  out << "\nCAF settings used: middleman.heartbeat-interval (default here 1s),\n"
         "middleman.connection-timeout (default here 10s). See docs/config.md.\n"
         "Exit codes (docs/operations.md#exit-codes): 0 done, 1 failed (retryable),\n"
         "2 configuration, 3 data, 4 diverged (permanent), 5 lost peer, 6 preempted\n"
         "(retryable).\n";
  return out.str();
}

namespace {

// A value as INI text that reads back as the same value: reals keep every
// significant digit and a decimal point (CAF prints six decimals, which
// turns 1e-7 into 0); a zero duration is 0s (CAF prints "0d", which it
// does not read).
std::string ini_text(const caf::config_value& value) {
  if (auto span = caf::get_if<caf::timespan>(&value); span && span->count() == 0)
    return "0s";
  if (auto real = caf::get_if<double>(&value)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", *real);
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) // n: nan, inf
      text += ".0";
    return text;
  }
  if (auto list = caf::get_if<caf::config_value::list>(&value)) {
    std::string text = "[";
    for (size_t i = 0; i < list->size(); ++i)
      text += (i ? ", " : "") + ini_text((*list)[i]);
    return text + "]";
  }
  return caf::to_string(value);
}

} // namespace

std::string dump_config(const node_config& cfg, const node_setup& s) {
  std::ostringstream out;
  out << "; effective Troupe configuration"
      << (s.config_file.empty() ? " (embedded defaults)" : " from " + s.config_file) << "\n"
      << "; job: " << (s.whole_cluster ? "whole cluster in one process" : s.name())
      << (s.sources.count("job_name") ? " (from " + s.sources.at("job_name") + ")" : "") << "\n"
      << "; each key set anywhere but by default says where above it\n";
  // Every Troupe key with the value in force, so the dump is a valid config.
  for (auto category : {"cluster", "train", "model", "data", "checkpoint", "export", "metrics"}) {
    out << "\n[" << category << "]\n";
    for (auto& opt : cfg.options())
      if (ini::str(opt.category()) == category)
        if (auto value = opt.get()) {
          auto key = std::string(category) + "." + ini::str(opt.long_name());
          if (auto from = s.sources.find(key); from != s.sources.end())
            out << "; from " << from->second << "\n";
          out << ini::str(opt.long_name()) << " = " << ini_text(*value) << "\n";
        }
  }
  out << "\n; derived: last-step " << s.train.last_step << ", replicas-to-aggregate "
      << s.train.replicas_to_aggregate << " of " << s.train.total_num_replicas << " worker(s)"
      << (s.train.replicas_follow_membership ? " (all: follows the workers taking part)" : "")
      << (s.runtime.max_workers > s.train.total_num_replicas
            ? ", worker indices up to " + std::to_string(s.runtime.max_workers - 1) + " may join"
            : "")
      << "\n";
  if (s.train.model == model_kind::declared) {
    out << "; network declared by the workers' programs (the troupe Python package)\n";
    return out.str();
  }
  try {
    auto net = make_model(s.train.model, model_options_of(s.train));
    size_t values = 0;
    for (auto& v : net->variables())
      values += static_cast<size_t>(num_elements(v.shape));
    out << "; network " << net->name() << ": " << net->variables().size() << " variables, "
        << values << " values (" << values * sizeof(float) << " bytes)\n";
    std::istringstream lines(net->describe());
    for (std::string line; std::getline(lines, line);)
      out << ";" << line << "\n";
    auto shards = static_cast<int32_t>(cfg.ps_hosts.size());
    if (shards > 0) {
      auto plan = plan_placement(s.train.placement, net->variables(), shards,
                                 s.train.placement_epsilon, s.train.partitioners);
      out << "; placement " << name_of(s.train.placement) << " over " << shards
          << " PS shard(s), imbalance of bytes held " << imbalance(plan, shards) << ":\n";
      for (auto& p : plan)
        out << ";   " << p.slice.name << " " << to_string(p.slice.shape) << " -> ps:" << p.shard
            << "\n";
    }
  } catch (const std::exception& e) {
    out << "; network: " << e.what() << "\n";
  }
  return out.str();
}

} // namespace troupe
