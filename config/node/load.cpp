// argv and the config file -> node_setup: the file's text values parsed into
// the typed settings, the settings checked once (check_settings), then what
// only a node can check: its addresses, its job and task, its data.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include "config/node/caf_sections.hpp"
#include "config/node/ini_checks.hpp"
#include "config/node/ini_scan.hpp"
#include "config/node/load_steps.hpp"
#include "config/node/node_config.hpp"
#include "config/node/tls.hpp"
#include "tensor/checkpoint/restore.hpp"
#include "tensor/data/dataset.hpp"

namespace troupe {

using load_steps::apply_tf_config;
using load_steps::catalog_for_node;
using load_steps::check_cluster;
using load_steps::check_data_size;
using load_steps::check_max_connections;
using load_steps::check_metrics;
using load_steps::check_plain_exposure;

namespace {

constexpr const char* default_config_file = "caf-application.conf";

std::chrono::milliseconds to_ms(caf::timespan t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t);
}

// The words of the error for a text value that names no enumerator:
// KEY = "TEXT" <not_known>; did you mean "CLOSEST"? (<choices>: a, b, c).
struct choice_words {
  const char* not_known = "is not known";
  const char* choices = "use one of";
};

// A text value that names an enumerator, or an error naming the key, the
// value and the choices.
template <class E>
E parse_choice(const char* key, const std::string& text, E fallback,
               std::vector<std::string>& errors, choice_words words = {}) {
  if (auto value = enum_from_name<E>(text))
    return *value;
  std::vector<std::string> names;
  for (auto& entry : enum_names<E>::table)
    names.emplace_back(entry.second);
  auto suggestion = closest_match(text, names);
  errors.push_back(std::string(key) + " = \"" + text + "\" " + words.not_known
                   + (suggestion.empty() ? std::string() : "; did you mean \"" + suggestion + "\"?")
                   + " (" + words.choices + ": " + name_list<E>() + ")");
  return fallback;
}

template <class F>
void parse_or_report(const std::string& key, std::vector<std::string>& errors, F parse) {
  try {
    parse();
  } catch (const std::exception& e) {
    errors.push_back(key + ": " + e.what());
  }
}

// train.replicas-to-aggregate: a count, or "all" (every worker taking part now).
void parse_replicas(const node_config& cfg, training_settings& t,
                    std::vector<std::string>& errors) {
  if (cfg.replicas_to_aggregate == "all") {
    t.replicas_follow_membership = true;
    t.replicas_to_aggregate = 0;
    return;
  }
  try {
    size_t used = 0;
    t.replicas_to_aggregate = std::stoll(cfg.replicas_to_aggregate, &used);
    if (used != cfg.replicas_to_aggregate.size())
      throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    errors.push_back("train.replicas-to-aggregate = \"" + cfg.replicas_to_aggregate
                     + "\" is neither a count nor \"all\"; write a number of workers (0: "
                       "every listed worker) or \"all\" (every worker taking part now)");
  }
}

// The [train] choices written as names.
void parse_train_choices(const node_config& cfg, training_settings& t,
                         std::vector<std::string>& errors) {
  t.model = parse_choice("train.model", cfg.model, t.model, errors,
                         {"is not a known model", "known"});
  t.mode = parse_choice("train.mode", cfg.mode, t.mode, errors);
  t.wire_precision = parse_choice("train.wire-precision", cfg.wire_precision, t.wire_precision,
                                  errors);
  t.on_worker_loss = parse_choice("train.on-worker-loss", cfg.on_worker_loss, t.on_worker_loss,
                                  errors);
  t.placement = parse_choice("train.placement", cfg.placement, t.placement, errors);
  t.optimizer.kind = parse_choice("train.optimizer", cfg.optimizer, t.optimizer.kind, errors);
  t.optimizer.learning_rate.type = parse_choice("train.lr-schedule", cfg.lr_schedule,
                                                t.optimizer.learning_rate.type, errors);
  parse_or_report("train.partitioners", errors,
                  [&] { t.partitioners = parse_partition_rules(cfg.partitioners); });
  parse_or_report("train.device", errors, [&] { t.device = gpu::parse_device(cfg.device); });
  t.worker_devices.clear();
  for (size_t i = 0; i < cfg.worker_devices.size(); ++i)
    parse_or_report("train.worker-devices[" + std::to_string(i) + "]", errors,
                    [&] { t.worker_devices.push_back(gpu::parse_device(cfg.worker_devices[i])); });
}

// The [data] values written as text.
void parse_data_text(const node_config& cfg, data_options& d, std::vector<std::string>& errors) {
  d.normalize = parse_choice("data.normalize", cfg.normalize, d.normalize, errors);
  d.bad_records = parse_choice("data.bad-records", cfg.bad_records, d.bad_records, errors);
  d.task = parse_choice("data.task", cfg.task, d.task, errors);
  d.csv.missing = parse_choice("data.missing-values", cfg.missing_values, d.csv.missing, errors);
  for (auto& text : cfg.missing_fill) {
    if (auto fill = parse_column_fill(text))
      d.csv.missing_fill.push_back(*fill);
    else
      errors.push_back("data.missing-fill: " + quote_input(text)
                       + " is not \"column=value\" with a finite number, e.g. "
                         "[\"total_charges=0\"]");
  }
  if (cfg.csv_delimiter == "tab" || cfg.csv_delimiter == "\\t" || cfg.csv_delimiter == "\t")
    d.csv.delimiter = '\t';
  else if (cfg.csv_delimiter.size() == 1 && cfg.csv_delimiter != "\"")
    d.csv.delimiter = cfg.csv_delimiter[0];
  else
    errors.push_back("data.csv-delimiter = \"" + cfg.csv_delimiter
                     + "\": give one character (e.g. \",\" or \";\") or \"tab\"");
}

// The [embedding] choices written as names.
void parse_embedding_choices(const node_config& cfg, embedding_settings& e,
                             std::vector<std::string>& errors) {
  e.initializer = parse_choice("embedding.initializer", cfg.embedding_initializer, e.initializer,
                               errors);
  e.optimizer.kind = parse_choice("embedding.optimizer", cfg.embedding_optimizer, e.optimizer.kind,
                                  errors);
  e.reduction = parse_choice("embedding.sync-reduction", cfg.sync_reduction, e.reduction, errors);
  e.kind = parse_choice("embedding.kind", cfg.embedding_kind, e.kind, errors);
  e.partition = parse_choice("embedding.partition", cfg.embedding_partition, e.partition, errors);
  e.ids = parse_choice("embedding.id-mapping", cfg.embedding_ids, e.ids, errors);
}

// The values the file writes as text, parsed into the typed settings.
training_settings typed_settings(const node_config& cfg, std::vector<std::string>& errors) {
  auto t = cfg.train;
  t.seed = static_cast<uint64_t>(cfg.seed);
  if (cfg.seed < 0)
    errors.push_back("train.seed must not be negative");
  t.checkpoint.save_interval = std::chrono::duration_cast<std::chrono::milliseconds>(
    cfg.save_interval);
  if (cfg.save_interval.count() < 0)
    t.checkpoint.save_interval = std::chrono::milliseconds(-1); // reported as out of range
  t.checkpoint.keep = static_cast<int32_t>(std::clamp<int64_t>(cfg.keep, -1, 1'000'000));
  t.checkpoint.delta_interval = std::chrono::duration_cast<std::chrono::milliseconds>(
    cfg.delta_interval);
  if (cfg.delta_interval.count() < 0)
    t.checkpoint.delta_interval = std::chrono::milliseconds(-1); // reported as out of range
  t.checkpoint.base_every = static_cast<int32_t>(
    std::clamp<int64_t>(cfg.base_every, -1, 1'000'000'000));
  // Deltas are made from checkpoints: one at least as often.
  auto& save = t.checkpoint.save_interval;
  if (t.checkpoint.delta_interval.count() > 0
      && (save.count() == 0 || save > t.checkpoint.delta_interval))
    save = t.checkpoint.delta_interval;
  if (t.checkpoint.serving_dir.empty() && !t.checkpoint.log_dir.empty())
    t.checkpoint.serving_dir = t.checkpoint.log_dir + "/serving";
  // 0: until stopped.
  if (t.last_step == 0 && t.epochs == 0)
    t.last_step = limits::max_steps;
  parse_replicas(cfg, t, errors);
  t.total_num_replicas = cfg.total_num_replicas;
  parse_train_choices(cfg, t, errors);
  parse_data_text(cfg, t.data, errors);
  parse_embedding_choices(cfg, t.embedding, errors);
  // The model's input and classes come from the data (catalog_for_node);
  // tasks that read none check the model against [model] where it is given.
  t.network.input = cfg.model_input;
  t.network.classes = cfg.model_classes;
  return t;
}

// The chief (or the whole cluster in one process) picks the checkpoint to
// start from and checks it against the model and optimizer now, so that a
// mismatch stops the run before any task trains.
void check_restore(const node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  auto restore = restore_request::parse(cfg.restore);
  if (!restore) {
    errors.push_back("--restore must be auto, never or a checkpoint directory");
    return;
  }
  setup.restore = *restore;
  if (!setup.whole_cluster && setup.job != job_kind::chief)
    return;
  try {
    auto choice = choose_checkpoint(setup.train.checkpoint.log_dir, setup.restore);
    setup.restore_notes = choice.notes;
    setup.restore_warnings = choice.warnings;
    if (!choice.reader)
      return;
    // A declared model's variables are checked when its first worker declares them.
    std::vector<variable_spec> variables;
    if (setup.train.model != model_kind::declared)
      variables = make_model(setup.train.model, model_options_of(setup.train))->variables();
    else
      for (auto& [name, shape] : choice.reader->manifest().variables)
        variables.push_back({name, shape, {}});
    auto problems = restore_problems(
      choice.reader->manifest(),
      checkpoint_fingerprint(setup.train.model, setup.train.optimizer.kind), variables);
    for (auto& p : problems)
      errors.push_back("checkpoint " + choice.reader->dir() + ": " + p
                       + "; restore it with the settings it was written with, or pass "
                         "--restore=never");
    if (problems.empty())
      setup.restore_from = choice.reader;
  } catch (const std::exception& e) {
    errors.push_back(std::string("checkpoint: ") + e.what());
  }
}

// The embedded default: chief, 2 PS shards and 2 workers in one process.
void apply_embedded_defaults(node_config& cfg) {
  cfg.chief_hosts = {"127.0.0.1:7000"};
  cfg.ps_hosts = {"127.0.0.1:7001", "127.0.0.1:7002"};
  cfg.worker_hosts = {"127.0.0.1:7101", "127.0.0.1:7102"};
}

// CAF names the offending argument; suggest the option it was meant to be.
std::string command_line_error(const node_config& cfg, const caf::error& err,
                               const std::vector<std::string>& args) {
  std::string bad;
  for (auto& a : args)
    if (caf::to_string(err).find(a) != std::string::npos)
      bad = a;
  std::vector<std::string> flags;
  for (auto& opt : cfg.options())
    flags.push_back(opt.category() == "global" ? ini::str(opt.long_name())
                                               : ini::str(opt.full_name()));
  auto name = bad.substr(0, bad.find('='));
  name.erase(0, name.find_first_not_of('-'));
  auto suggestion = closest_match(name, flags);
  std::string hint = suggestion.empty() ? "; see troupe-node --help"
                                        : "; did you mean --" + suggestion + "?";
  if (!suggestion.empty() && suggestion == name) {
    auto opt = cfg.options().cli_long_name_lookup(name);
    hint = opt ? "; expected " + ini::type_hint(*opt) : "";
    // CAF takes a boolean on the command line as a bare flag only.
    if (opt && ini::str(opt->type_name()) == "boolean")
      hint = "; on the command line a true/false key is a bare flag: --" + name
             + " sets it true; set it false in the config file";
  }
  return "command line: " + (bad.empty() ? caf::to_string(err) : "cannot use '" + bad + "'") + hint;
}

} // namespace

std::string node_setup::name() const {
  return whole_cluster ? "local" : std::string(name_of(job)) + ":" + std::to_string(task);
}

namespace {

// What the command line asks for, besides the options CAF parses.
struct command_line {
  std::vector<std::string> args; // for CAF's parser
  std::string config_file;
  bool explicit_file = false;
};

command_line split_command_line(int argc, char** argv, load_outcome& out) {
  command_line cl;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      out.what = load_outcome::action::help;
    else if (arg == "--dump-config")
      out.what = load_outcome::action::dump_config;
    else if (arg.rfind("--config-file=", 0) == 0) {
      cl.config_file = arg.substr(14);
      cl.explicit_file = true;
    } else if (arg == "--config-file" && i + 1 < argc) {
      cl.config_file = argv[++i];
      cl.explicit_file = true;
    } else
      cl.args.push_back(arg);
  }
  if (!cl.explicit_file && std::ifstream(default_config_file))
    cl.config_file = default_config_file;
  return cl;
}

// CAF's parser sees nothing the lexical scan refuses (it would recurse on
// deep nesting, or keep the last of two equal keys without a word).
void scan_arguments(const std::vector<std::string>& args, std::vector<std::string>& errors) {
  std::set<std::string> flags_seen;
  for (auto& arg : args) {
    for (auto& problem : ini::scan_text(arg, "command line '" + arg.substr(0, 60) + "'", false))
      errors.push_back(problem);
    auto flag = arg.substr(0, arg.find('='));
    if (!flags_seen.insert(flag).second)
      errors.push_back("command line: " + flag + " is given twice; keep one");
  }
}

// The config file's text, scanned and its keys checked before CAF parses
// it; false when what follows would only echo the errors.
bool read_config_file(const node_config& cfg, const std::string& path, std::stringstream& text,
                      std::vector<std::string>& keys, std::vector<std::string>& errors) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    errors.push_back("the config file '" + path + "' is "
                     + (S_ISDIR(info.st_mode)
                          ? "a directory; pass the file in it, e.g. --config-file=" + path + "/"
                              + default_config_file
                          : std::string("not a regular file (a FIFO or a device?); pass "
                                        "the config file itself")));
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    errors.push_back("cannot read the config file '" + path
                     + "'; check the path given with --config-file=");
    return false;
  }
  text << in.rdbuf();
  for (auto& problem : ini::scan_text(text.str(), path, true, {}, &keys))
    errors.push_back(problem);
  if (!errors.empty())
    return false;
  ini::check_file_keys(cfg, path, text, keys, errors);
  if (!errors.empty() && errors.back().find(": syntax error: ") != std::string::npos)
    return false;
  text.clear();
  text.seekg(0);
  return true;
}

// Whether the file or the command line name the cluster's tasks; a file
// without them (only [train], [data], ...) runs the default cluster in one
// process, as no file does.
bool names_tasks(const std::vector<std::string>& file_keys, const std::vector<std::string>& args) {
  auto is_task_key = [](const std::string& key) {
    return key == "cluster.chief" || key == "cluster.ps" || key == "cluster.worker";
  };
  return std::any_of(file_keys.begin(), file_keys.end(), is_task_key)
         || std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
              return arg.rfind("--", 0) == 0 && is_task_key(arg.substr(2, arg.find('=') - 2));
            });
}

// Which cluster this node belongs to and where each value came from: the
// file, the command line, TF_CONFIG or the embedded default.
void settle_cluster(node_config& cfg, const command_line& cl,
                    const std::vector<std::string>& file_keys, bool tasks_named, node_setup& setup,
                    std::vector<std::string>& errors) {
  setup.config_file = cl.config_file;
  for (auto& key : file_keys)
    setup.sources[key] = cl.config_file;
  for (auto& arg : cl.args)
    if (arg.rfind("--", 0) == 0)
      setup.sources[arg.substr(2, arg.find('=') - 2)] = "the command line";
  bool from_tf_config = false;
  if (const char* env = std::getenv("TF_CONFIG"); env && *env)
    from_tf_config = apply_tf_config(cfg, env, setup, errors);
  setup.whole_cluster = cfg.job_name.empty();
  if (!tasks_named && !from_tf_config) {
    if (!setup.whole_cluster)
      errors.push_back("--job_name=" + cfg.job_name + " needs a cluster: "
                       + (cl.config_file.empty()
                            ? std::string("no ") + default_config_file
                                + " in the working directory; pass --config-file=FILE"
                            : "'" + cl.config_file
                                + "' lists no tasks (cluster.chief, cluster.ps, "
                                  "cluster.worker); add a [cluster] section")
                       + " (examples in config/examples/), or set TF_CONFIG");
    else
      setup.embedded_defaults = true;
  }
  if (setup.whole_cluster && std::any_of(cl.args.begin(), cl.args.end(), [](const std::string& a) {
        return a.rfind("--task_index", 0) == 0;
      }))
    errors.push_back("--task_index needs --job_name (ps, worker or chief); without a job "
                     "every task runs in this process");
  check_cluster(cfg, setup, errors);
  check_max_connections(cfg, setup, errors);
}

// The typed settings, checked once, and what the run derives from them and
// from the data, the same on every task.
void settle_settings(node_config& cfg, node_setup& setup, std::vector<std::string>& errors) {
  check_caf_sections(cfg, errors);
  setup.train = typed_settings(cfg, errors);
  setup.runtime.connect_timeout = to_ms(cfg.connect_timeout);
  setup.runtime.request_timeout = to_ms(cfg.request_timeout);
  setup.runtime.worker_wait_timeout = to_ms(cfg.worker_wait_timeout);
  setup.runtime.step_lease_timeout = to_ms(cfg.step_lease_timeout);
  setup.runtime.recovery_timeout = to_ms(cfg.recovery_timeout);
  setup.runtime.bulk_path = cfg.bulk_path;
  setup.runtime.max_refused_steps = cfg.max_refused_steps;
  if (cfg.max_workers < 0 || cfg.max_workers > limits::max_workers)
    errors.push_back("cluster.max-workers = " + std::to_string(cfg.max_workers)
                     + " is out of range; use 0 (only the listed workers) or at least the listed "
                       "workers, at most "
                     + std::to_string(limits::max_workers));
  else
    setup.runtime.max_workers = static_cast<int32_t>(cfg.max_workers);
  // The tasks listed, whether or not each address parsed.
  cluster_shape shape{static_cast<int32_t>(cfg.ps_hosts.size()),
                      static_cast<int32_t>(cfg.worker_hosts.size())};
  catalog_for_node(cfg, setup, errors);
  // An unknown train.model is reported above; no network is checked in its
  // place (the fallback's would not be the one meant).
  if (!enum_from_name<model_kind>(cfg.model))
    setup.train.network.classes = 0;
  for (auto& problem : check_settings(setup.train, setup.runtime, shape))
    errors.push_back(problem.message);
  if (setup.train.model == model_kind::declared && setup.whole_cluster)
    errors.push_back("train.model = declared: the workers are the programs that declare the "
                     "model (the troupe Python package); run the ps and chief tasks with "
                     "troupe-node --job_name, not the whole cluster in one process");
  if (setup.train.model == model_kind::declared && setup.job == job_kind::evaluator)
    errors.push_back("train.model = declared: an evaluator task cannot run a declared model; "
                     "evaluate it in its program (tt.load on the checkpoint)");
  // R, N and (from the data) last_step.
  setup.train.replicas_to_aggregate = replicas_of(setup.train, shape);
  setup.train.total_num_replicas = shape.workers;
  check_data_size(setup, errors);
  setup.tls = check_tls(cfg, setup, errors);
  check_plain_exposure(cfg, setup, errors);
  check_metrics(cfg, setup, errors);
  if (errors.empty())
    check_restore(cfg, setup, errors);
}

} // namespace

load_outcome load_node_config(node_config& cfg, int argc, char** argv,
                              const std::function<void(const node_setup&)>& cluster_known) {
  load_outcome out;
  auto cl = split_command_line(argc, argv, out);
  if (out.what == load_outcome::action::help)
    return out;
  scan_arguments(cl.args, out.errors);
  std::stringstream text;
  std::vector<std::string> file_keys; // "section.key" the file sets
  // Unknown keys in the file are reported with everything found after them;
  // a file that cannot be read or scanned ends here.
  if (!out.errors.empty()
      || (!cl.config_file.empty()
          && !read_config_file(cfg, cl.config_file, text, file_keys, out.errors))) {
    out.what = load_outcome::action::fail;
    return out;
  }
  bool tasks_named = names_tasks(file_keys, cl.args);
  if (!tasks_named)
    apply_embedded_defaults(cfg); // before parsing, so --cluster.* overrides them
  if (auto err = cfg.parse(cl.args, text))
    out.errors.push_back(command_line_error(cfg, err, cl.args));
  if (!cl.config_file.empty())
    ini::coerce_reals(cfg, cl.config_file, cl.args);
  settle_cluster(cfg, cl, file_keys, tasks_named, out.setup, out.errors);
  if (cluster_known && out.errors.empty() && out.what != load_outcome::action::dump_config)
    cluster_known(out.setup);
  settle_settings(cfg, out.setup, out.errors);
  if (!out.errors.empty())
    out.what = load_outcome::action::fail;
  else if (out.what != load_outcome::action::dump_config)
    out.what = load_outcome::action::run;
  return out;
}

} // namespace troupe
