#pragma once
// What troupe-export, troupe-predict and troupe-eval share: their command
// lines (positional arguments and --key=value options), the exit codes, their
// main around a loaded model,
// reading an input file the way the model wants it, in batches. No CAF.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/data/catalog.hpp"
#include "tensor/export/model_export.hpp"

namespace troupe::tools {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1; ///< ran, and failed (an unreadable file mid-way)
constexpr int exit_usage = 2;   ///< bad arguments, or a model and data that do not fit

struct command_line {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options; ///< "--key=value" and "--flag" (value "")

  /// The value of --key, or "" when it is not given.
  std::string option(const std::string& key) const {
    auto found = options.find(key);
    return found == options.end() ? std::string() : found->second;
  }
};

/// Splits argv; an option not in `known`, or other than `positionals`
/// positional arguments (up to `most`, where more are allowed), is a usage
/// error (the option named, the usage printed, exit_usage).
inline command_line parse_command_line(int argc, char** argv, const std::vector<std::string>& known,
                                       const std::string& usage, size_t positionals,
                                       size_t most = 0) {
  command_line out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      std::exit(exit_ok);
    }
    if (arg.rfind("--", 0) != 0) {
      out.positional.push_back(arg);
      continue;
    }
    auto eq = arg.find('=');
    auto key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    bool ok = false;
    for (auto& k : known)
      ok = ok || k == key;
    if (!ok) {
      std::cerr << "unknown option --" << key << "\n" << usage;
      std::exit(exit_usage);
    }
    out.options[key] = eq == std::string::npos ? "" : arg.substr(eq + 1);
  }
  if (out.positional.size() < positionals || out.positional.size() > std::max(most, positionals)) {
    std::cerr << usage;
    std::exit(exit_usage);
  }
  return out;
}

/// Runs `body`, turning what it throws into a message and an exit code: a
/// data_error or checkpoint_error (the files do not fit) exits 2.
inline int run_tool(const char* name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const data_error& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return exit_usage;
  } catch (const checkpoint_error& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return exit_failure;
  }
}

/// The main of a tool whose first positional argument is a model (an export
/// directory or a checkpoint; --card=FILE where `known` lists it): the
/// command line parsed as parse_command_line does, the model loaded, and
/// body(model, command_line) run under run_tool.
template <class Body>
int run_model_tool(const char* name, int argc, char** argv, const std::vector<std::string>& known,
                   const std::string& usage, size_t positionals, Body&& body) {
  auto cl = parse_command_line(argc, argv, known, usage, positionals);
  return run_tool(name, [&] {
    auto model = load_model(cl.positional[0], cl.option("card"));
    return body(model, cl);
  });
}

/// The input file(s) read as `card` wants: the format from the name (or
/// --format), CSV columns per --csv-delimiter/--no-header, the label column
/// per --label-column or the card's. Labelled (evaluation): the labels must
/// be there. Unlabelled (prediction): a CSV may still hold the card's label
/// column, which is then left out.
inline std::shared_ptr<data_split> input_split(const model_card& card, const command_line& cl,
                                               const std::string& input, bool labelled) {
  auto format = format_of_name(input);
  if (auto f = cl.options.find("format"); f != cl.options.end()) {
    auto named = enum_from_name<data_format>(f->second);
    if (!named)
      throw data_error("--format=" + f->second + ": use idx, csv, npy, criteo or libsvm");
    format = *named;
  }
  csv_layout csv;
  csv.header = cl.options.count("no-header") == 0;
  csv.categorical_columns = card.categorical_columns;
  csv.ignore_columns = card.ignore_columns;
  if (card.keys.sparse() && card.keys.fields == 1)
    csv.max_keys = card.keys.keys_per_field; // libsvm: the slots the model was trained with
  if (auto d = cl.options.find("csv-delimiter"); d != cl.options.end())
    csv.delimiter = d->second == "tab" ? '\t' : d->second.empty() ? ',' : d->second[0];
  auto given = cl.options.find("label-column");
  csv.label_column = given != cl.options.end()    ? given->second
                     : !card.label_column.empty() ? card.label_column
                                                  : std::string("label");
  std::vector<std::string> labels;
  if (auto l = cl.options.find("labels"); l != cl.options.end())
    labels.push_back(l->second);
  if (labelled) {
    if (!labels_in_text(format) && labels.empty())
      throw data_error(input
                       + ": IDX and .npy keep labels in a file of their own; pass it "
                         "with --labels=FILE");
    return split_for_model(card, format, {input}, labels, csv, true);
  }
  if (format == data_format::csv) {
    // Without the label column where the file has none, with it left out
    // where it has it.
    auto label = csv.label_column;
    csv.label_column.clear();
    auto probe = open_csv(input, csv); // without the fills: no indicators counted
    auto values = num_elements(card.input) - card.missing.indicators();
    if (probe->features() == values + 1 && given == cl.options.end()) {
      csv.label_column = label;
      try {
        open_csv(input, csv);
      } catch (const data_error&) {
        csv.label_column.clear(); // no such column: the count says what is wrong
      }
    } else if (given != cl.options.end()) {
      csv.label_column = label;
    }
  }
  return split_for_model(card, format, {input}, labels, csv, false);
}

/// Reads `source` to its end in batches of at most 256 examples: each as
/// `b` (images [n, features], n labels, and n targets `with_targets`, else
/// none), passed to use(b, n).
template <class Use>
void for_each_batch(example_source& source, int64_t features, bool with_targets, Use&& use) {
  constexpr int64_t batch_rows = 256;
  batch b;
  for (bool more = true; more;) {
    b.images.resize({batch_rows, features});
    b.labels.resize(batch_rows);
    b.targets.resize(batch_rows);
    int64_t n = 0;
    while (n < batch_rows
           && (more = source.next(b.images.data() + n * features, b.labels[static_cast<size_t>(n)],
                                  b.targets[static_cast<size_t>(n)])))
      ++n;
    if (n == 0)
      break;
    b.images.resize({n, features}); // the last batch: its first n rows, in place
    b.labels.resize(static_cast<size_t>(n));
    b.targets.resize(with_targets ? static_cast<size_t>(n) : 0);
    use(b, n);
  }
}

} // namespace troupe::tools
