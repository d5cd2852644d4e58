#include "tensor/checkpoint/restore.hpp"

#include <algorithm>
#include <filesystem>

namespace troupe {

std::map<std::string, std::string> checkpoint_fingerprint(model_kind model,
                                                          optimizer_kind optimizer) {
  std::string slots;
  for (auto& s : slot_names(optimizer))
    slots += (slots.empty() ? "" : ",") + s;
  return {{"model", name_of(model)}, {"optimizer", name_of(optimizer)}, {"slots", slots}};
}

std::vector<std::string> restore_problems(const checkpoint_manifest& manifest,
                                          const std::map<std::string, std::string>& fingerprint,
                                          const std::vector<variable_spec>& variables) {
  std::vector<std::string> out;
  for (auto& [key, now] : fingerprint) {
    auto saved = manifest.fingerprint.find(key);
    if (saved == manifest.fingerprint.end() || saved->second != now)
      out.push_back("the checkpoint was written with " + key + " = '"
                    + (saved == manifest.fingerprint.end() ? std::string("?") : saved->second)
                    + "', this run uses '" + now + "'");
  }
  for (auto& v : variables) {
    auto* shape = manifest.shape_of(v.name);
    if (shape == nullptr)
      out.push_back("variable " + v.name + " " + to_string(v.shape)
                    + " is not in the checkpoint (another model?)");
    else if (*shape != v.shape)
      out.push_back("variable " + v.name + " is " + to_string(*shape) + " in the checkpoint but "
                    + to_string(v.shape) + " in this model");
  }
  for (auto& saved : manifest.variables)
    if (std::none_of(variables.begin(), variables.end(),
                     [&](const variable_spec& v) { return v.name == saved.first; }))
      out.push_back("the checkpoint holds variable " + saved.first + " " + to_string(saved.second)
                    + ", which this model lacks");
  return out;
}

std::optional<restore_request> restore_request::parse(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  if (text == "auto")
    return restore_request{};
  if (text == "never")
    return restore_request{kind::never, {}};
  return restore_request{kind::directory, text};
}

restore_choice choose_checkpoint(const std::string& log_dir, const restore_request& restore) {
  restore_choice out;
  if (restore.how == restore_request::kind::never) {
    out.notes.push_back("--restore=never: initialising from the seed");
    return out;
  }
  if (restore.how == restore_request::kind::directory) {
    out.reader = std::make_shared<checkpoint_reader>(restore.directory);
    out.notes.push_back("restoring " + restore.directory + " (--restore)");
    return out;
  }
  if (log_dir.empty())
    return out;
  checkpoint_dir dir(log_dir);
  std::vector<std::string> candidates;
  std::string pointer_problem;
  try {
    if (auto latest = dir.latest())
      candidates.push_back(*latest);
  } catch (const checkpoint_error& e) {
    pointer_problem = e.what();
  }
  for (auto& c : dir.complete())
    if (std::find(candidates.begin(), candidates.end(), c) == candidates.end())
      candidates.push_back(c);
  if (candidates.empty()) {
    out.notes.push_back("no checkpoint in " + log_dir + ": initialising from the seed");
    return out;
  }
  if (!pointer_problem.empty())
    out.warnings.push_back(pointer_problem + "; looking for complete checkpoints instead");
  std::vector<std::string> problems;
  for (auto& c : candidates) {
    try {
      out.reader = std::make_shared<checkpoint_reader>(c);
      out.notes.push_back("restoring " + c + " (step " + std::to_string(out.reader->manifest().step)
                          + ")");
      return out;
    } catch (const checkpoint_error& e) {
      out.warnings.push_back(std::string(e.what()) + "; trying the previous checkpoint");
      problems.push_back(e.what());
    }
  }
  std::string all;
  for (auto& p : problems)
    all += "\n  " + p;
  throw checkpoint_error("no usable checkpoint in " + log_dir + ":" + all
                         + "\nmove them away to start from the seed, or pass --restore=never");
}

} // namespace troupe
