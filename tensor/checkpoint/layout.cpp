#include "tensor/checkpoint/layout.hpp"

#include <map>

namespace troupe {

std::vector<saved_tensor> describe_saved_tensors(const std::vector<planned_slice>& plan,
                                                 const std::vector<variable_spec>& variables,
                                                 const std::vector<std::string>& names,
                                                 const std::string& file) {
  std::map<std::string, const planned_slice*> slices;
  for (auto& s : plan)
    slices.emplace(s.name, &s);
  std::vector<saved_tensor> out;
  for (auto& name : names) {
    if (name.rfind("emb/", 0) == 0)
      continue; // an embedding table's rows: saved by key (table_file.hpp)
    auto i = slices.find(name);
    std::string slot;
    if (i == slices.end()) {
      auto cut = name.rfind('/');
      if (cut != std::string::npos) {
        i = slices.find(name.substr(0, cut));
        slot = name.substr(cut + 1);
      }
    }
    if (i == slices.end())
      throw checkpoint_error(file + ": '" + name
                             + "' is neither a slice of the plan nor an optimizer slot of one");
    auto& s = *i->second;
    out.push_back(
      {name, variables.at(static_cast<size_t>(s.variable)).name, slot, s.axis, s.offset, file});
  }
  return out;
}

} // namespace troupe
