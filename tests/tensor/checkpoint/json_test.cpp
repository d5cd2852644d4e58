// The JSON of checkpoints (tensor/checkpoint/json.hpp).
#include <boost/test/unit_test.hpp>

#include "tensor/checkpoint/json.hpp"

namespace json = troupe::json;

BOOST_AUTO_TEST_SUITE(json_tests)

BOOST_AUTO_TEST_CASE(what_is_written_reads_back) {
  json::value v = json::object{{"name", "fc1/weights/part_0"},
                               {"shape", json::array{784, 10}},
                               {"offset", int64_t{9007199254740991}},
                               {"ratio", 0.25},
                               {"ok", true},
                               {"none", json::value{}},
                               {"text", "quote \" backslash \\ newline \n tab \t \x01"}};
  auto text = json::write(v);
  auto back = json::parse(text);
  BOOST_TEST(json::write(back) == text);
  BOOST_TEST(*back.find("offset")->as_int() == 9007199254740991);
  BOOST_TEST(*back.find("text")->as_string() == "quote \" backslash \\ newline \n tab \t \x01");
  BOOST_TEST(*back.find("ratio")->as_number() == 0.25);
  BOOST_TEST(back.find("none")->is_null());
  BOOST_TEST(!back.find("ratio")->as_int());
}

BOOST_AUTO_TEST_CASE(escapes_and_unicode) {
  auto v = json::parse(R"(["\u00e9\ud83d\ude00", "a\/b"])");
  auto& a = *v.as_array();
  BOOST_TEST(*a[0].as_string() == "\xc3\xa9\xf0\x9f\x98\x80");
  BOOST_TEST(*a[1].as_string() == "a/b");
}

BOOST_AUTO_TEST_CASE(malformed_text_is_refused_with_its_offset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,\"a\":2}", "tru", "1 2", "\"\x01\"",
                          "\"\\ud800\"", "1e999", "-", "01x", "{\"a\" 1}", "[\"\\q\"]"}) {
    BOOST_CHECK_THROW(json::parse(bad), json::parse_error);
  }
  try {
    json::parse("[1, 2, }");
    BOOST_FAIL("parsed");
  } catch (const json::parse_error& e) {
    BOOST_TEST(std::string(e.what()).find("at byte 7") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(nesting_is_bounded) {
  BOOST_CHECK_NO_THROW(json::parse(std::string(30, '[') + std::string(30, ']')));
  BOOST_CHECK_THROW(json::parse(std::string(100000, '[')), json::parse_error);
}

BOOST_AUTO_TEST_SUITE_END()
