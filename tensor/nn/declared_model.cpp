#include "tensor/nn/declared_model.hpp"

#include <cmath>
#include <set>
#include <sstream>

#include "tensor/core/error.hpp"

namespace troupe {

namespace {

void check_name(const std::string& what, const std::string& name, std::set<std::string>& seen,
                std::vector<std::string>& out) {
  if (name.empty())
    out.push_back(what + " without a name");
  else if (name.size() > declaration_limits::max_name)
    out.push_back(what + " " + name.substr(0, 40) + "... has a name of "
                  + std::to_string(name.size()) + " characters; at most "
                  + std::to_string(declaration_limits::max_name));
  else if (!seen.insert(name).second)
    out.push_back(what + " " + name
                  + " is declared twice (names must be unique, tables and "
                    "variables together)");
}

bool all_finite(const tensor& t) {
  for (size_t i = 0; i < t.size(); ++i)
    if (!std::isfinite(t.data()[i]))
      return false;
  return true;
}

} // namespace

std::vector<std::string> declaration_problems(const model_declaration& d) {
  std::vector<std::string> out;
  if (d.variables.empty() && d.tables.empty())
    out.push_back("the model declares no variable and no table");
  if (d.variables.size() > declaration_limits::max_variables)
    out.push_back(std::to_string(d.variables.size()) + " variables declared; at most "
                  + std::to_string(declaration_limits::max_variables));
  if (d.tables.size() > declaration_limits::max_tables)
    out.push_back(std::to_string(d.tables.size()) + " tables declared; at most "
                  + std::to_string(declaration_limits::max_tables));
  if (d.initial.size() != d.variables.size())
    out.push_back(std::to_string(d.initial.size()) + " first values for "
                  + std::to_string(d.variables.size()) + " variables");
  if (!out.empty())
    return out;
  std::set<std::string> seen;
  for (size_t i = 0; i < d.variables.size(); ++i) {
    auto& v = d.variables[i];
    check_name("variable", v.name, seen, out);
    bool sized = !v.shape.empty();
    for (auto extent : v.shape)
      sized = sized && extent >= 1;
    if (!sized)
      out.push_back("variable " + v.name + " has shape " + to_string(v.shape)
                    + "; every dimension must be at least 1 (a scalar: [1])");
    else if (d.initial[i].shape() != v.shape)
      out.push_back("variable " + v.name + " is declared " + to_string(v.shape)
                    + " but its first value is " + to_string(d.initial[i].shape()));
    else if (!all_finite(d.initial[i]))
      out.push_back("variable " + v.name + "'s first value is not finite");
  }
  for (auto& t : d.tables) {
    check_name("table", t.name, seen, out);
    if (t.dim < 1 || t.dim > declaration_limits::max_dim)
      out.push_back("table " + t.name + " has dim " + std::to_string(t.dim) + "; use 1.."
                    + std::to_string(declaration_limits::max_dim));
  }
  return out;
}

std::optional<std::string> declaration_difference(const model_declaration& ours,
                                                  const model_declaration& theirs) {
  auto& a = ours.variables;
  auto& b = theirs.variables;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size())
      return "it declares variable " + b[i].name + " " + to_string(b[i].shape)
             + ", which the run's model does not have";
    if (i >= b.size())
      return "it lacks variable " + a[i].name + " " + to_string(a[i].shape) + " of the run's model";
    if (a[i].name != b[i].name)
      return "its variable " + std::to_string(i) + " is " + b[i].name + ", the run's is "
             + a[i].name;
    if (a[i].shape != b[i].shape)
      return "its variable " + b[i].name + " has shape " + to_string(b[i].shape) + ", the run's "
             + to_string(a[i].shape);
  }
  auto& s = ours.tables;
  auto& t = theirs.tables;
  for (size_t i = 0; i < std::max(s.size(), t.size()); ++i) {
    if (i >= s.size())
      return "it declares table " + t[i].name + ", which the run's model does not have";
    if (i >= t.size())
      return "it lacks table " + s[i].name + " of the run's model";
    if (s[i].name != t[i].name)
      return "its table " + std::to_string(i) + " is " + t[i].name + ", the run's is " + s[i].name;
    if (s[i].dim != t[i].dim)
      return "its table " + t[i].name + " has dim " + std::to_string(t[i].dim) + ", the run's "
             + std::to_string(s[i].dim);
  }
  return std::nullopt;
}

declared_model::declared_model(model_declaration declaration)
  : declaration_(std::move(declaration)) {
  auto problems = declaration_problems(declaration_);
  if (problems.empty())
    return;
  std::string why = "the declared model is refused:";
  for (auto& p : problems)
    why += " " + p + ";";
  why.pop_back();
  throw troupe_error(why);
}

const std::string& declared_model::name() const {
  static const std::string declared = "declared";
  return declared;
}

batch_stats declared_model::train_step(const std::vector<tensor>&, const batch&,
                                       std::vector<tensor>&) {
  throw troupe_error("a declared model computes in its worker's program, not here");
}

batch_stats declared_model::evaluate(const std::vector<tensor>&, const batch&) {
  throw troupe_error("a declared model is evaluated by its program (the troupe Python "
                     "package), not by troupe-node");
}

std::string declared_model::describe() const {
  std::ostringstream out;
  for (auto& v : declaration_.variables)
    out << "  variable " << v.name << " " << to_string(v.shape) << "\n";
  for (auto& t : declaration_.tables)
    out << "  table " << t.name << " dim " << t.dim << "\n";
  return out.str();
}

} // namespace troupe
