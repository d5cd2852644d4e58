// The BASP guard (actors/protocol/basp_guard.hpp): its interposition is in
// force, its allow-list is Troupe's, the broker's gate refuses what a frame
// must not carry, and decoding never lets CAF's exceptions out. Its own
// binary: the guard, once on, is on for the whole process.
#define BOOST_TEST_MODULE basp_guard
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/node_id.hpp>

#include "actors/protocol/basp_guard.hpp"
#include "actors/protocol/protocol.hpp"

using namespace troupe;

namespace {

struct guarded_config : caf::actor_system_config {
  guarded_config() {
    load<caf::io::middleman>();
    register_protocol(*this);
    guard_basp(*this, basp_limits{});
  }
};

struct fixture {
  guarded_config cfg;
  caf::actor_system sys{cfg};

  // A direct message's payload: no stages, then `msg`.
  std::vector<char> payload(const caf::message& msg) {
    std::vector<char> out;
    caf::binary_serializer sink{sys, out};
    std::vector<caf::strong_actor_ptr> stages;
    BOOST_REQUIRE(!sink(stages, msg));
    return out;
  }

  std::string judge(const std::vector<char>& bytes, bool routed = false, bool response = false) {
    return judge_basp_message(sys.dummy_execution_unit(), routed, response, bytes.data(),
                              bytes.size());
  }

  caf::error decode(const std::vector<char>& bytes, caf::message& out) {
    caf::binary_deserializer source{sys, bytes};
    return source(out);
  }
};

// A message's bytes as a stranger writes them: any type names, then any bytes.
std::vector<char> forged_message(const std::string& names, const std::string& bytes) {
  std::vector<char> out;
  caf::binary_serializer sink{nullptr, out};
  uint16_t zero = 0;
  auto text = names;
  BOOST_REQUIRE(!sink.begin_object(zero, text));
  if (!bytes.empty())
    BOOST_REQUIRE(!sink.apply_raw(bytes.size(), const_cast<char*>(bytes.data())));
  return out;
}

const std::string bad_variant = "\x7f" + std::string(63, '\xff');

} // namespace

BOOST_FIXTURE_TEST_SUITE(basp_guard, fixture)

BOOST_AUTO_TEST_CASE(cafs_functions_go_through_the_guard) {
  BOOST_TEST(basp_guard_problem() == "");
}

BOOST_AUTO_TEST_CASE(the_allow_list_is_troupes_types_and_plain_builtins) {
  for (auto name : {"@atom", "@str", "@u64", "@error", "troupe::step_report",
                    "std::vector<troupe::tensor>", "troupe::pull_reply"})
    BOOST_TEST(basp_type_allowed(name), name);
  for (auto name :
       {"@exit", "@down", "@config_value", "@message", "@group", "@downstream_msg", "@upstream_msg",
        "@open_stream_msg", "@strmap", "stream<troupe::tensor>", "my::type", ""})
    BOOST_TEST(!basp_type_allowed(name), name);
  BOOST_TEST(caf_builtin_type_names().size() == 43u);
}

BOOST_AUTO_TEST_CASE(a_troupe_message_passes_the_gate_and_decodes) {
  auto push = caf::make_message(push_atom::value, run_id{7}, int32_t{1}, int64_t{3}, uint64_t{0},
                                int32_t{0}, std::vector<std::string>{"w"},
                                std::vector<tensor>{tensor({2})});
  auto bytes = payload(push);
  BOOST_TEST(judge(bytes) == "");
  std::vector<char> routed;
  caf::binary_serializer sink{sys, routed};
  BOOST_REQUIRE(!sink(sys.node(), sys.node()));
  routed.insert(routed.end(), bytes.begin(), bytes.end());
  BOOST_TEST(judge(routed, true) == "");
  BOOST_TEST(judge(payload(caf::make_message())) == "");
}

BOOST_AUTO_TEST_CASE(the_gate_refuses_cafs_own_types_stages_and_garbage) {
  std::vector<char> stages_then_message;
  {
    caf::binary_serializer sink{sys, stages_then_message};
    std::vector<caf::strong_actor_ptr> one{nullptr};
    BOOST_REQUIRE(!sink(one, caf::make_message(stop_atom::value)));
  }
  BOOST_TEST(judge(stages_then_message).find("forwarding stages") != std::string::npos);
  auto with_names = [&](const std::string& names) {
    std::vector<char> out(1, '\0'); // no stages
    auto msg = forged_message(names, bad_variant);
    out.insert(out.end(), msg.begin(), msg.end());
    return judge(out);
  };
  BOOST_TEST(with_names("@<>+@config_value").find("@config_value") != std::string::npos);
  BOOST_TEST(with_names("@<>+@atom+@group").find("@group") != std::string::npos);
  BOOST_TEST(with_names("@<>+@atom+").find("empty type name") != std::string::npos);
  BOOST_TEST(with_names("nonsense") != "");
  BOOST_TEST(judge(std::vector<char>{}) != "");
  // CAF's broker would cast a local actor named in (link, actor) to a proxy.
  auto local = caf::actor_cast<caf::strong_actor_ptr>(
    sys.spawn([]() -> caf::behavior { return {[](int32_t) {}}; }));
  for (caf::atom_value what : {caf::atom("link"), caf::atom("unlink")})
    BOOST_TEST(judge(payload(caf::make_message(what, local))).find("link request")
               != std::string::npos);
  BOOST_TEST(judge(payload(caf::make_message(caf::ok_atom::value, local))) == "");
  // An error is a response's content; on its own, an actor would quit on it.
  auto failure = payload(caf::make_message(caf::make_error(caf::sec::runtime_error)));
  BOOST_TEST(judge(failure).find("answers no request") != std::string::npos);
  BOOST_TEST(judge(failure, false, true) == "");
  for (auto& own : {caf::make_message(caf::exit_msg{local->address(), caf::exit_reason::kill}),
                    caf::make_message(caf::down_msg{local->address(), caf::exit_reason::kill})})
    BOOST_TEST(judge(payload(own)).find("not part of Troupe's protocol") != std::string::npos);
  caf::anon_send_exit(local, caf::exit_reason::kill);
  BOOST_TEST(judge(std::vector<char>(3, '\xff'), true) != "");
}

// The input that crashed scripts/test's fuzzing on a fresh clone (issue 25):
// CAF's @config_value decoder threw on a variant index out of range. CAF
// 0.17 ignores the error a message's decoder returns (its serialize() for
// type_erased_tuple drops it), so a refused message arrives empty: what
// matters is that nothing throws and nothing of it is decoded.
BOOST_AUTO_TEST_CASE(the_fuzzers_config_value_input_is_dropped_not_thrown) {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR)
                     + "/tests/fuzz/corpus/messages/crash-config-value-variant",
                   std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_REQUIRE(bytes.size() > 1);
  bytes.erase(bytes.begin()); // the fuzz target's pick
  auto before = basp_guard_refusals().messages;
  caf::message msg;
  BOOST_CHECK_NO_THROW(decode(bytes, msg));
  BOOST_TEST(msg.empty());
  BOOST_TEST(basp_guard_refusals().messages == before + 1);
}

// Inside an error, where only decoding sees the names: the inner message is
// refused (the error arrives without its context), nothing is thrown.
BOOST_AUTO_TEST_CASE(a_config_value_inside_an_error_is_refused) {
  std::vector<char> bytes;
  {
    caf::binary_serializer sink{sys, bytes};
    uint16_t zero = 0;
    std::string names = "@<>+@error";
    uint8_t code = 1;
    auto category = caf::atom("troupe");
    BOOST_REQUIRE(!sink.begin_object(zero, names));
    BOOST_REQUIRE(!sink(code, category));
  }
  auto inner = forged_message("@<>+@config_value", bad_variant);
  bytes.insert(bytes.end(), inner.begin(), inner.end());
  auto before = basp_guard_refusals().messages;
  caf::message msg;
  BOOST_CHECK_NO_THROW(decode(bytes, msg));
  BOOST_TEST(basp_guard_refusals().messages == before + 1);
  BOOST_REQUIRE(msg.match_elements<caf::error>());
  BOOST_TEST(msg.get_as<caf::error>(0).context().empty());
}

// How many errors are nested in `msg` (an error whose context is an error...).
int error_depth(const caf::message& msg) {
  int depth = 0;
  const caf::message* level = &msg;
  while (level->match_elements<caf::error>()) {
    ++depth;
    auto& err = level->get_as<caf::error>(0);
    if (!err)
      break;
    level = &err.context();
  }
  return depth;
}

BOOST_AUTO_TEST_CASE(towers_of_nested_messages_stop_at_four_levels) {
  auto tower = caf::make_message(std::string("bottom"));
  for (int level = 0; level < 3; ++level)
    tower = caf::make_message(caf::error{1, caf::atom("troupe"), tower});
  caf::message back;
  std::vector<char> bytes;
  {
    caf::binary_serializer sink{sys, bytes};
    BOOST_REQUIRE(!sink(tower));
  }
  auto before = basp_guard_refusals().messages;
  decode(bytes, back);
  BOOST_TEST(error_depth(back) == 3, "three errors around a string decode whole");
  BOOST_TEST(basp_guard_refusals().messages == before);
  for (int level = 0; level < 200; ++level)
    tower = caf::make_message(caf::error{1, caf::atom("troupe"), tower});
  bytes.clear();
  {
    caf::binary_serializer sink{sys, bytes};
    BOOST_REQUIRE(!sink(tower));
  }
  BOOST_CHECK_NO_THROW(decode(bytes, back));
  BOOST_TEST(error_depth(back) <= 4);
  BOOST_TEST(basp_guard_refusals().messages > before);
}

BOOST_AUTO_TEST_SUITE_END()
