// The chief's side of the report channel, with a real chief and shard on a
// threaded actor system and a report link on loopback: the plan offers a
// port and a ticket, an ask on the link is answered with the grant BASP
// would give; a `relayed` message with a key no connection has is refused
// and changes nothing; a batch claiming another worker's index closes the
// connection with `unauthorized`.
#include <condition_variable>
#include <deque>
#include <mutex>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster.hpp"
#include "actors/net/report_channel.hpp"
#include "actors/protocol/report_frames.hpp"
#include "tests/support/actors.hpp"
#include "tests/support/synthetic_data.hpp"

using namespace troupe;
using namespace troupe::testing;
using namespace std::chrono_literals;

namespace {

struct relay_cfg : caf::actor_system_config {
  relay_cfg() {
    load<caf::io::middleman>();
    register_protocol(*this);
  }
};

// What the link's reader thread hands out: grants or the loss.
struct line_events {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<step_grant>> answers;
  std::optional<failure> lost;

  void start(report_link& line) {
    line.start(
      [this](uint64_t, bulk::meta_reader& fields) {
        std::vector<step_grant> grants;
        BOOST_CHECK(read_grants(fields, 8, grants));
        std::lock_guard<std::mutex> guard{mutex};
        answers.push_back(std::move(grants));
        changed.notify_all();
      },
      [this](const failure& why) {
        std::lock_guard<std::mutex> guard{mutex};
        lost = why;
        changed.notify_all();
      });
  }
  std::optional<std::vector<step_grant>> answer(std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock{mutex};
    if (!changed.wait_for(lock, within, [&] { return !answers.empty() || lost; })
        || answers.empty())
      return std::nullopt;
    auto a = std::move(answers.front());
    answers.pop_front();
    return a;
  }
  std::optional<failure> loss(std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock{mutex};
    changed.wait_for(lock, within, [&] { return lost.has_value(); });
    return lost;
  }
};

std::optional<uint64_t> ask(report_link& line, const step_report& r) {
  bulk::meta_writer fields;
  write_reports(fields, {r});
  return line.send(fields, 10s);
}

} // namespace

BOOST_AUTO_TEST_SUITE(report_relay)

BOOST_AUTO_TEST_CASE(the_chief_answers_its_workers_on_the_report_channel_only) {
  relay_cfg cfg;
  caf::actor_system sys{cfg};
  auto settings = small_settings(1000);
  auto data = synthetic_data();
  auto shard = spawn_ps_shard(sys, 0, settings);
  bulk_peers bulk;
  bulk.chief_host = "127.0.0.1";
  auto chief = spawn_chief(
    sys, settings, runtime_settings{}, 1, {shard}, data.test, [](const training_result&) {},
    spawn_mode::detached, nullptr, {}, bulk);
  // Worker 0, as far as the chief can tell: its plan offers the channel.
  caf::scoped_actor worker{sys};
  training_plan plan;
  worker->request(chief, 10s, ready_atom::value, int32_t{0})
    .receive([&](training_plan& p) { plan = std::move(p); },
             [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_REQUIRE(plan.report_port != 0);
  BOOST_REQUIRE(plan.report_ticket != 0);

  line_events events; // outlives the line, whose thread calls it
  maybe_failure error;
  auto line = report_link::open("127.0.0.1", plan.report_port, plan.run, plan.report_ticket,
                                "worker:0", std::chrono::steady_clock::now() + 10s, error);
  BOOST_REQUIRE_MESSAGE(line, (error ? error->message : ""));
  events.start(*line);
  step_report first;
  first.run = plan.run;
  first.worker = 0; // step -1: an ask
  BOOST_REQUIRE(ask(*line, first));
  auto grants = events.answer();
  BOOST_REQUIRE(grants);
  BOOST_REQUIRE_EQUAL(grants->size(), 1u);
  BOOST_CHECK(!grants->front().stop);
  BOOST_CHECK_EQUAL(grants->front().step, 0);
  BOOST_CHECK(grants->front().proof != 0);

  // A `relayed` message is only as good as its key: a guess is refused.
  for (uint64_t guess : {uint64_t{0}, uint64_t{1}, uint64_t{0x0123456789abcdef}})
    caf::anon_send(caf::actor_cast<caf::actor>(chief), relayed_atom::value, guess, uint64_t{1},
                   std::vector<step_report>{first});
  BOOST_CHECK(!events.answer(300ms));
  BOOST_REQUIRE(ask(*line, first)); // the second step of the lease, not one for the guesses
  grants = events.answer();
  BOOST_REQUIRE(grants);
  BOOST_CHECK_EQUAL(grants->front().step, 1);

  // Worker 0's connection cannot speak for worker 1.
  step_report other = first;
  other.worker = 1;
  BOOST_REQUIRE(ask(*line, other));
  auto lost = events.loss();
  BOOST_REQUIRE(lost);
  BOOST_CHECK(lost->code == errc::unauthorized);
  BOOST_CHECK_MESSAGE(lost->message.find("not opened by the worker admitted") != std::string::npos,
                      lost->message);
  caf::anon_send_exit(chief, caf::exit_reason::kill);
  caf::anon_send_exit(shard, caf::exit_reason::kill);
}

BOOST_AUTO_TEST_SUITE_END()
