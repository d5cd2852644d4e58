// A model declared by a worker's program (tensor/nn/declared_model.hpp):
// each problem a declaration can have is named, each difference between two
// is named at its first place, and a declared model computes nothing itself.
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/declared_model.hpp"

using namespace troupe;

namespace {

model_declaration mf() {
  model_declaration d;
  d.variables = {{"mean", {1}, {}}, {"top.weight", {2, 3}, {}}};
  d.initial = {tensor({1}), tensor({2, 3})};
  d.tables = {{"users", 8}, {"items", 8}};
  return d;
}

bool names(const std::vector<std::string>& problems, const std::string& part) {
  for (auto& p : problems)
    if (p.find(part) != std::string::npos)
      return true;
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(declared_model_tests)

BOOST_AUTO_TEST_CASE(a_sound_declaration_has_no_problems) {
  BOOST_TEST(declaration_problems(mf()).empty());
  declared_model m(mf());
  BOOST_TEST(m.variables().size() == 2u);
  BOOST_TEST(m.tables().size() == 2u);
  BOOST_TEST(m.declaration() != nullptr);
  BOOST_TEST(!m.brings_batches()); // its program's subclass does
}

BOOST_AUTO_TEST_CASE(each_problem_is_named) {
  auto twice = mf();
  twice.tables[1].name = "mean";
  BOOST_TEST(names(declaration_problems(twice), "mean is declared twice"));
  auto zero = mf();
  zero.variables[1].shape = {2, 0};
  zero.initial[1] = tensor({1});
  BOOST_TEST(names(declaration_problems(zero), "every dimension must be at least 1"));
  auto off = mf();
  off.initial[1] = tensor({3, 2});
  BOOST_TEST(names(declaration_problems(off), "declared [2, 3] but its first value is [3, 2]"));
  auto nan = mf();
  nan.initial[0].data()[0] = std::nanf("");
  BOOST_TEST(names(declaration_problems(nan), "first value is not finite"));
  auto wide = mf();
  wide.tables[0].dim = 5000;
  BOOST_TEST(names(declaration_problems(wide), "users has dim 5000"));
  auto short_of_values = mf();
  short_of_values.initial.pop_back();
  BOOST_TEST(names(declaration_problems(short_of_values), "1 first values for 2 variables"));
  BOOST_TEST(names(declaration_problems(model_declaration{}), "declares no variable"));
  BOOST_CHECK_THROW(declared_model{twice}, troupe_error);
}

BOOST_AUTO_TEST_CASE(the_first_difference_is_named) {
  auto ours = mf();
  BOOST_TEST(!declaration_difference(ours, mf()));
  auto other = mf();
  other.initial[0].data()[0] = 5; // each program draws its own first values
  BOOST_TEST(!declaration_difference(ours, other));
  other.variables[1].shape = {3, 2};
  BOOST_TEST(*declaration_difference(ours, other)
             == "its variable top.weight has shape [3, 2], the run's [2, 3]");
  other = mf();
  other.tables[1].dim = 6;
  BOOST_TEST(*declaration_difference(ours, other) == "its table items has dim 6, the run's 8");
  other = mf();
  other.tables.pop_back();
  BOOST_TEST(*declaration_difference(ours, other) == "it lacks table items of the run's model");
  other = mf();
  other.variables.push_back({"extra", {1}, {}});
  BOOST_TEST(declaration_difference(ours, other)->find("extra") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_declared_model_computes_nothing_itself) {
  declared_model m(mf());
  std::vector<tensor> params, grads;
  batch b;
  BOOST_CHECK_THROW(m.train_step(params, b, grads), troupe_error);
  BOOST_CHECK_THROW(m.evaluate(params, b), troupe_error);
  BOOST_CHECK_THROW(make_model(model_kind::declared), troupe_error);
}

BOOST_AUTO_TEST_SUITE_END()
