// The three lists that must agree: the message types in the published
// interfaces, the types register_protocol registers, and the error codes
// with their names; and docs/protocol.md names the code's version.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <typeindex>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/protocol/protocol.hpp"

using namespace troupe;

namespace {

struct registry {
  caf::actor_system_config cfg;
  std::vector<std::string> missing;
  registry() { register_protocol(cfg); }

  template <class T>
  void need() {
    if constexpr (!std::is_void<T>::value) {
      if (caf::type_nr<T>::value != 0)
        return; // one of CAF's own types (atoms, integers, strings, ...)
      if (cfg.type_names_by_rtti.count(std::type_index(typeid(T))) == 0)
        missing.push_back(caf::detail::pretty_type_name(typeid(T)));
    }
  }

  template <class... Is, class... Os>
  void need_signature(caf::typed_mpi<caf::detail::type_list<Is...>, caf::output_tuple<Os...>>*) {
    (need<Is>(), ...);
    (need<Os>(), ...);
  }

  template <class... Sigs>
  void need_all(caf::detail::type_list<Sigs...>) {
    (need_signature(static_cast<Sigs*>(nullptr)), ...);
  }

  /// Every argument and reply type of every message of the interface.
  template <class Handle>
  void need_interface() {
    need_all(typename Handle::signatures{});
    need<Handle>(); // handles travel too (plans, options, remote_actor)
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(protocol_tests)

BOOST_AUTO_TEST_CASE(every_type_of_every_interface_is_registered) {
  registry r;
  r.need_interface<ps_shard_actor>();
  r.need_interface<chief_actor>();
  r.need_interface<worker_actor>();
  r.need_interface<token_queue_actor>();
  r.need_interface<step_coordinator_actor>();
  BOOST_TEST(
    r.missing.empty(), "not registered in TROUPE_MESSAGE_TYPES: " << [&] {
      std::string all;
      for (auto& m : r.missing)
        all += m + " ";
      return all;
    }());
  // And the check would notice one: a type nobody registered.
  struct unregistered {};
  r.need<unregistered>();
  BOOST_TEST(r.missing.size() == 1u);
}

BOOST_AUTO_TEST_CASE(every_error_code_has_its_own_name) {
  std::set<std::string> names;
  for (auto c = static_cast<int>(errc::first_code_) + 1; c < static_cast<int>(errc::end_of_codes_);
       ++c) {
    std::string name = to_string(static_cast<errc>(c));
    BOOST_TEST(name != "unknown_error", "code " << c);
    BOOST_TEST(names.insert(name).second, "code " << c << " repeats " << name);
  }
  BOOST_TEST(names.size() == 12u);
  BOOST_TEST(static_cast<int>(errc::unknown_variable) == 1); // values cross the wire
  BOOST_TEST(static_cast<int>(errc::stale_gradient) == 9);
  caf::actor_system_config cfg;
  register_protocol(cfg);
  caf::actor_system sys{cfg};
  BOOST_TEST(describe(make_error({errc::stale_gradient, "late"})) == "stale_gradient: late");
}

BOOST_AUTO_TEST_CASE(docs_name_the_protocol_version_of_the_code) {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/docs/protocol.md");
  BOOST_REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  auto doc = text.str();
  BOOST_REQUIRE(std::regex_search(doc, m, std::regex("protocol_version = ([0-9]+);")));
  BOOST_TEST(std::stoul(m[1]) == protocol_version);
}

BOOST_AUTO_TEST_SUITE_END()
