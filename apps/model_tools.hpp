#pragma once
// What troupe-export, troupe-predict and troupe-eval share: their command
// lines (positional arguments and --key=value options), the exit codes, and
// reading an input file the way the model wants it. No CAF.
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
};

/// Splits argv; an option not in `known` is a usage error naming it.
inline command_line parse_command_line(int argc, char** argv, const std::vector<std::string>& known,
                                       const std::string& usage) {
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
      throw data_error("--format=" + f->second + ": use idx, csv or npy");
    format = *named;
  }
  csv_layout csv;
  csv.header = cl.options.count("no-header") == 0;
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
    if (format != data_format::csv && labels.empty())
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
    auto probe = open_csv(input, csv);
    if (probe->features() == num_elements(card.input) + 1 && given == cl.options.end()) {
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

} // namespace troupe::tools
