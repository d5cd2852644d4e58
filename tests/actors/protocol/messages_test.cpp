// Messages within one process.
#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "tests/support/actors.hpp"

using namespace troupe;
using namespace troupe::testing;

BOOST_FIXTURE_TEST_SUITE(in_process_messages, deterministic_fixture)

BOOST_AUTO_TEST_CASE(in_process_tensors_are_not_copied) {
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](const tensor& t) { return reinterpret_cast<uint64_t>(t.data()); }};
  });
  sched.run();
  tensor t({1000}, 1.0f);
  auto address = reinterpret_cast<uint64_t>(t.data());
  auto seen = ask<uint64_t>(echo, std::move(t));
  BOOST_REQUIRE(seen);
  BOOST_TEST(*seen == address);
}

BOOST_AUTO_TEST_SUITE_END()
