// The lines of embedding models' formats (tensor/data/sparse_lines.hpp):
// Criteo's TSV with empty fields, libsvm, and lines that cannot be used.
#include <cmath>
#include <string>

#include <boost/test/unit_test.hpp>

#include "tensor/data/sparse_lines.hpp"
#include "tensor/sparse/keys.hpp"

using namespace troupe;

namespace {

// A Criteo line: label, 13 integers, 26 categorical values.
std::string criteo_line(const std::string& label, const std::string& first_integer,
                        const std::string& first_category) {
  std::string line = label + "\t" + first_integer;
  for (int i = 2; i <= 13; ++i)
    line += "\t" + std::to_string(i);
  line += "\t" + first_category;
  for (int c = 2; c <= 26; ++c)
    line += c == 5 ? "\t" : "\t68fd1e6" + std::to_string(c % 10);
  return line;
}

template <class F>
std::string refusal(F parse) {
  try {
    parse();
  } catch (const bad_record& e) {
    return e.what();
  }
  return "accepted";
}

} // namespace

BOOST_AUTO_TEST_SUITE(sparse_lines)

BOOST_AUTO_TEST_CASE(criteo_fields_with_empty_values) {
  sparse_example e;
  parse_criteo_line(criteo_line("1", "", "05db9164") + "\r", e);
  BOOST_TEST(e.label == 1.0f);
  BOOST_TEST(e.dense.size() == 26u);
  BOOST_TEST(e.dense[0] == 0.0f);                                  // empty I1 reads 0 ...
  BOOST_TEST(e.dense[12] == static_cast<float>(std::log1p(13.0))); // sign(x) log(1 + |x|)
  BOOST_TEST(e.dense[13] == 1.0f); // ... and its indicator says it was empty
  BOOST_TEST(e.dense[14] == 0.0f);
  BOOST_TEST(e.dense[25] == 0.0f);
  BOOST_TEST(e.fields() == 26u);
  // C5 is empty: an empty bag; the others one key each, tagged by field.
  BOOST_TEST(e.keys.size() == 25u);
  BOOST_TEST(e.field_offsets[5] - e.field_offsets[4] == 0u);
  BOOST_TEST(e.keys[0] == field_key(0, "05db9164"));
  BOOST_TEST(e.keys[1] == field_key(1, "68fd1e62"));
  BOOST_TEST(e.weights.empty());
  // The same value in two fields gives two keys.
  BOOST_TEST(field_key(0, "68fd1e62") != field_key(1, "68fd1e62"));
  parse_criteo_line(criteo_line("0", "-1", ""), e);
  BOOST_TEST(e.label == 0.0f);
  BOOST_TEST(e.dense[0] == static_cast<float>(-std::log1p(1.0)));
  BOOST_TEST(e.dense[13] == 0.0f); // a written I1, even a negative one, is not empty
  BOOST_TEST(e.keys.size() == 24u);
}

BOOST_AUTO_TEST_CASE(criteo_lines_that_cannot_be_used) {
  sparse_example e;
  BOOST_TEST(refusal([&] { parse_criteo_line("1\t2\t3", e); }).find("this one holds 3")
             != std::string::npos);
  BOOST_TEST(refusal([&] {
               parse_criteo_line(criteo_line("1", "1", "a") + "\textra", e);
             }).find("this one holds 41")
             != std::string::npos);
  BOOST_TEST(refusal([&] { parse_criteo_line(criteo_line("2", "1", "a"), e); }).find("0 or 1")
             != std::string::npos);
  BOOST_TEST(refusal([&] { parse_criteo_line(criteo_line("1", "x7", "a"), e); }).find("I1 = 'x7'")
             != std::string::npos);
  BOOST_TEST(refusal([&] { parse_criteo_line("", e); }) != "accepted");
}

// A 10 MB field is named by its start and its length, not echoed whole.
BOOST_AUTO_TEST_CASE(a_huge_bad_field_is_cut_in_the_message) {
  sparse_example e;
  std::string huge(10 << 20, '7');
  huge[1] = 'x';
  auto why = refusal([&] { parse_criteo_line(criteo_line("1", huge, "a"), e); });
  BOOST_TEST(why.size() < 200u, why.substr(0, 300));
  BOOST_TEST(why.find("I1 = '7x777") != std::string::npos, why.substr(0, 300));
  BOOST_TEST(why.find("(10485760 bytes) is not an integer") != std::string::npos,
             why.substr(0, 300));
  auto label = refusal([&] { parse_libsvm_line(std::string(1 << 20, 'q') + " 3:1", e); });
  BOOST_TEST(label.size() < 200u);
  BOOST_TEST(quote_input("a\tb") == "'a?b'");
  BOOST_TEST(quote_input(std::string(41, 'z')) == "'" + std::string(40, 'z') + "...' (41 bytes)");
}

BOOST_AUTO_TEST_CASE(libsvm_ids_and_weights) {
  sparse_example e;
  parse_libsvm_line("-1 3:0.5  10:1\t7:-2e-1\r", e);
  BOOST_TEST(e.label == -1.0f);
  BOOST_TEST(e.keys == (std::vector<int64_t>{3, 10, 7}));
  BOOST_TEST(e.weights == (std::vector<float>{0.5f, 1.0f, -0.2f}));
  BOOST_TEST(e.fields() == 1u);
  parse_libsvm_line("+1", e);
  BOOST_TEST(e.label == 1.0f);
  BOOST_TEST(e.keys.empty());
  for (const char* bad :
       {"1 3", "1 -3:1", "1 3:nan", "1 a:1", "1 3:1x", "x 3:1", "1 281474976710656:1"})
    BOOST_TEST(refusal([&] { parse_libsvm_line(bad, e); }) != "accepted", bad);
}

BOOST_AUTO_TEST_SUITE_END()
