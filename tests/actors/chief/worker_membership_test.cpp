// Elastic membership's shares, without CAF.
#include <boost/test/unit_test.hpp>

#include "actors/chief/worker_membership.hpp"

using namespace troupe;

namespace {
using share = worker_membership::share;
}

BOOST_AUTO_TEST_SUITE(worker_membership_tests)

// The listed workers read index of N, as without elastic membership.
BOOST_AUTO_TEST_CASE(the_listed_workers_read_their_index_of_the_list) {
  worker_membership m(3);
  for (int32_t w = 0; w < 3; ++w)
    BOOST_TEST((m.share_of(w) == share{w, 3}));
  BOOST_TEST(!m.joined(1)); // a listed (or restarted) worker changes nothing
  BOOST_TEST(m.count() == 3);
}

// 2 -> 4 -> 1: ranks follow the indices of the members, whoever joined or left.
BOOST_AUTO_TEST_CASE(joiners_and_leavers_change_every_share) {
  worker_membership m(2);
  BOOST_TEST((m.share_of(5) == share{2, 3})); // not a member yet: as if it were
  BOOST_TEST(m.joined(5));
  BOOST_TEST(m.joined(2));
  BOOST_TEST((m.share_of(0) == share{0, 4}));
  BOOST_TEST((m.share_of(1) == share{1, 4}));
  BOOST_TEST((m.share_of(2) == share{2, 4}));
  BOOST_TEST((m.share_of(5) == share{3, 4}));
  BOOST_TEST(m.left(0));
  BOOST_TEST(!m.left(0));
  BOOST_TEST(m.left(5));
  BOOST_TEST(m.left(1));
  BOOST_TEST(m.count() == 1);
  BOOST_TEST((m.share_of(2) == share{0, 1}));
  BOOST_TEST(!m.member(0));
  BOOST_TEST(m.joined(0)); // a listed worker back after leaving
  BOOST_TEST((m.share_of(0) == share{0, 2}));
  BOOST_TEST((m.share_of(2) == share{1, 2}));
}

BOOST_AUTO_TEST_SUITE_END()
