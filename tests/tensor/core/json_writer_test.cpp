// The one JSON writer (tensor/core/json_writer.hpp).
#include <cmath>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "tensor/core/json_writer.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(json_writer_tests)

BOOST_AUTO_TEST_CASE(strings_escape_quotes_backslashes_and_control_characters) {
  BOOST_TEST(json_string("plain text") == "\"plain text\"");
  BOOST_TEST(json_string("say \"hi\" \\ bye") == "\"say \\\"hi\\\" \\\\ bye\"");
  BOOST_TEST(json_string("a\nb\rc\td") == "\"a\\nb\\rc\\td\"");
  BOOST_TEST(json_string(std::string("\x01\x1f\0x", 4)) == "\"\\u0001\\u001f\\u0000x\"");
  BOOST_TEST(json_string("caf\xc3\xa9 \x7f") == "\"caf\xc3\xa9 \x7f\""); // UTF-8 and DEL pass
  std::string out = "[";
  append_json_string(out, "x");
  BOOST_TEST(out == "[\"x\"");
}

BOOST_AUTO_TEST_CASE(members_and_elements_are_separated_by_commas) {
  json_writer w;
  w.begin_object()
    .key("event")
    .string("final")
    .key("ok")
    .boolean(true)
    .key("none")
    .null()
    .key("list")
    .begin_array()
    .integer(1)
    .integer(uint64_t{18446744073709551615u})
    .begin_object()
    .end_object()
    .begin_array()
    .end_array()
    .end_array()
    .key("data")
    .raw("{\"a\":1}")
    .end_object();
  BOOST_TEST(w.text()
             == "{\"event\":\"final\",\"ok\":true,\"none\":null,"
                "\"list\":[1,18446744073709551615,{},[]],\"data\":{\"a\":1}}");
}

BOOST_AUTO_TEST_CASE(numbers_come_out_as_their_format_writes_them) {
  json_writer w;
  w.begin_array()
    .number(0.834567, "%.4f")
    .number(0.0625, "%.9g")
    .number(0.1, "%.17g")
    .number(1.5, "%f")
    .number(1e300, "%.1f")
    .end_array();
  auto& text = w.text();
  BOOST_TEST(text.rfind("[0.8346,0.0625,0.10000000000000001,1.500000,1", 0) == 0, text);
  BOOST_TEST(text.size() == 1 + 7 + 7 + 20 + 9 + 303 + 1, text); // 1e300 whole: 301 digits + ".0"
  // Not finite: what printf writes, as the writers before this one did.
  json_writer nan;
  nan.number(std::numeric_limits<double>::quiet_NaN(), "%.4f");
  BOOST_TEST(nan.text() == "nan");
}

BOOST_AUTO_TEST_SUITE_END()
