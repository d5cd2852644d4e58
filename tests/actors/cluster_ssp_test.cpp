// Bounded staleness (train.mode = "ssp") through whole clusters on CAF's
// test_coordinator: one worker starved of turns, the others may not get
// more than `staleness` steps ahead of it; async lets them run away.
#include <algorithm>
#include <map>
#include <set>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/cluster.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

struct ssp_outcome {
  training_result result;
  int64_t widest_gap = 0; ///< most distinct steps granted: fastest minus slowest
};

// 3 workers, 40 steps; worker 2 gets one turn in 8 (its jobs go to the back
// of the queue the other times, while another actor has one).
ssp_outcome run_starved(caf::scheduler::test_coordinator& sched, caf::actor_system& sys,
                        update_mode mode, int64_t staleness) {
  ssp_outcome out;
  auto settings = small_settings(40);
  settings.mode = mode;
  settings.staleness = staleness;
  auto run = cooperative_cluster(sys, settings, 1, 3, out.result);
  std::map<caf::abstract_actor*, int32_t> worker_of;
  for (int32_t w = 0; w < 3; ++w)
    worker_of[raw(run.workers[static_cast<size_t>(w)])] = w;
  auto* starved = raw(run.workers[2]);
  std::map<int32_t, std::set<int64_t>> granted;
  int passed_over = 0;
  while (sched.has_job()) {
    auto* front = static_cast<caf::abstract_actor*>(&sched.next_job<caf::scheduled_actor>());
    if (sched.jobs.size() > 1 && front == starved && ++passed_over % 8 != 0) {
      sched.jobs.push_back(sched.jobs.front());
      sched.jobs.pop_front();
      continue;
    }
    auto& next = sched.next_job<caf::scheduled_actor>();
    auto who = worker_of.find(static_cast<caf::abstract_actor*>(&next));
    if (auto* e = next.mailbox().peek(); e && who != worker_of.end()) {
      auto& msg = e->content();
      if (msg.size() == 1 && msg.match_element<step_grant>(0) && !msg.get_as<step_grant>(0).stop) {
        granted[who->second].insert(msg.get_as<step_grant>(0).step);
        size_t low = SIZE_MAX, high = 0;
        for (int32_t w = 0; w < 3; ++w) {
          low = std::min(low, granted[w].size());
          high = std::max(high, granted[w].size());
        }
        out.widest_gap = std::max(out.widest_gap, static_cast<int64_t>(high - low));
      }
    }
    sched.run_once();
  }
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(cluster_ssp, deterministic_fixture)

BOOST_AUTO_TEST_CASE(a_starved_worker_holds_the_others_back_by_the_staleness_bound) {
  auto async = run_starved(sched, sys, update_mode::async, 0);
  BOOST_TEST(async.result.ok);
  // Async: the two others take most of the 40 steps while worker 2 waits.
  BOOST_TEST(async.widest_gap > 5, "async gap " << async.widest_gap);
  for (int64_t s : {0, 2}) {
    auto ssp = run_starved(sched, sys, update_mode::ssp, s);
    BOOST_TEST(ssp.result.ok);
    BOOST_TEST((ssp.result.mode == update_mode::ssp));
    BOOST_TEST(ssp.result.global_step == 40); // every update counted once
    // A worker starts a step only while at most s ahead of the slowest's
    // updates, and the slowest has received a grant for each of its updates:
    // s + 1 distinct steps apart at most.
    BOOST_TEST(ssp.widest_gap <= s + 1, "ssp " << s << " gap " << ssp.widest_gap);
    BOOST_TEST_MESSAGE("async gap " << async.widest_gap << ", ssp " << s << " gap "
                                    << ssp.widest_gap);
  }
}

BOOST_AUTO_TEST_SUITE_END()
