// The report channel without a chief: a server on loopback whose handler
// answers batches from another thread, out of order; links that show good,
// reused and foreign tickets; losses (a newer connection of the same
// worker, close_worker, an answer overdue, a malformed batch) reported once
// with their reason; and the same exchange under mutual TLS.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "actors/net/report_channel.hpp"
#include "tests/support/identity_files.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

bulk::deadline report_deadline() {
  return std::chrono::steady_clock::now() + 10s;
}

// A batch the server read: its connection, request, worker and one field.
struct batch {
  uint64_t key = 0, request = 0;
  int32_t worker = -1;
  int64_t value = 0;
};

// Waits for values put from other threads.
template <class T>
class mailbox {
public:
  void put(T v) {
    std::lock_guard<std::mutex> guard{mutex_};
    items_.push_back(std::move(v));
    changed_.notify_all();
  }
  std::optional<T> take(std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock{mutex_};
    if (!changed_.wait_for(lock, within, [&] { return !items_.empty(); }))
      return std::nullopt;
    auto v = std::move(items_.front());
    items_.pop_front();
    return v;
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<T> items_;
};

// A server whose handler takes one i64 field (anything else is malformed)
// and leaves the answer to the test.
struct server_fixture {
  mailbox<batch> batches;
  std::unique_ptr<report_server> server;
  explicit server_fixture(std::shared_ptr<const bulk::tls_context> tls = nullptr) {
    report_server_options options;
    options.host = "127.0.0.1";
    options.tls = std::move(tls);
    maybe_failure error;
    server = std::make_unique<report_server>(
      [this](uint64_t key, uint64_t request, int32_t worker,
             bulk::meta_reader& fields) -> maybe_failure {
        auto value = fields.i64();
        if (!fields.at_end())
          return failure{errc::invalid_request, "a malformed test batch"};
        batches.put({key, request, worker, value});
        return std::nullopt;
      },
      options, error);
    BOOST_REQUIRE(!error);
  }
  std::unique_ptr<report_link> open(uint64_t ticket, maybe_failure& error,
                                    const bulk::tls_context* tls = nullptr) {
    return report_link::open("127.0.0.1", server->port(), 7, ticket, "worker:test",
                             report_deadline(), error, tls);
  }
  void answer(const batch& b, int64_t value) {
    bulk::meta_writer fields;
    fields.i64(value);
    BOOST_CHECK(server->answer(b.key, b.request, fields));
  }
};

// What a link's reader thread hands out.
struct link_events {
  mailbox<std::pair<uint64_t, int64_t>> answers; // request, value
  mailbox<failure> losses;
  void start(report_link& link) {
    link.start(
      [this](uint64_t request, bulk::meta_reader& fields) {
        answers.put({request, fields.i64()});
      },
      [this](const failure& why) { losses.put(why); });
  }
};

// A link for `worker` (admission `owner`), its reader handing out to
// `events`, which must outlive it.
std::unique_ptr<report_link> open_started(server_fixture& fx, int32_t worker, uint64_t owner,
                                          link_events& events,
                                          const bulk::tls_context* tls = nullptr) {
  maybe_failure error;
  auto link = fx.open(fx.server->issue_ticket(worker, owner), error, tls);
  BOOST_REQUIRE_MESSAGE(link, (error ? error->message : ""));
  events.start(*link);
  return link;
}

std::optional<uint64_t> send_value(report_link& link, int64_t value,
                                   std::chrono::milliseconds within = 10s) {
  bulk::meta_writer fields;
  fields.i64(value);
  return link.send(fields, within);
}

// Three overlapping batches answered in reverse order from another thread
// (the chief answers a parked worker later): each answer names its request.
void overlapping_batches(server_fixture& fx, report_link& link, link_events& events) {
  std::vector<uint64_t> requests;
  for (int64_t v : {10, 20, 30}) {
    auto request = send_value(link, v);
    BOOST_REQUIRE(request);
    requests.push_back(*request);
  }
  std::vector<batch> got;
  for (int i = 0; i < 3; ++i) {
    auto b = fx.batches.take();
    BOOST_REQUIRE(b);
    BOOST_CHECK_EQUAL(b->worker, 3);
    got.push_back(*b);
  }
  BOOST_CHECK_EQUAL(got[0].value, 10);
  BOOST_CHECK_EQUAL(got[2].value, 30);
  BOOST_CHECK(fx.server->worker_of(got[0].key).has_value());
  std::thread answering([&] {
    for (auto it = got.rbegin(); it != got.rend(); ++it)
      fx.answer(*it, it->value + 1);
  });
  answering.join();
  for (int i = 0; i < 3; ++i) {
    auto a = events.answers.take();
    BOOST_REQUIRE(a);
    auto pos = std::find(requests.begin(), requests.end(), a->first) - requests.begin();
    BOOST_REQUIRE(pos < 3);
    BOOST_CHECK_EQUAL(a->second, 10 * (pos + 1) + 1);
  }
  BOOST_CHECK(!events.losses.take(50ms));
}

} // namespace

BOOST_AUTO_TEST_SUITE(report_channel)

BOOST_AUTO_TEST_CASE(answers_name_their_requests_in_any_order) {
  server_fixture fx;
  link_events events; // outlives the link, whose thread calls it
  auto link = open_started(fx, 3, 42, events);
  overlapping_batches(fx, *link, events);
  auto b = fx.batches.take(10ms);
  BOOST_CHECK(!b);
  auto request = send_value(*link, 5);
  BOOST_REQUIRE(request);
  auto last = fx.batches.take();
  BOOST_REQUIRE(last);
  auto holder = fx.server->worker_of(last->key);
  BOOST_REQUIRE(holder);
  BOOST_CHECK_EQUAL(holder->worker, 3);
  BOOST_CHECK_EQUAL(holder->owner, 42u);
}

BOOST_AUTO_TEST_CASE(only_a_fresh_ticket_of_this_server_opens_a_connection) {
  server_fixture fx;
  maybe_failure error;
  auto foreign = fx.open(12345, error);
  BOOST_CHECK(!foreign);
  BOOST_REQUIRE(error);
  BOOST_CHECK(error->code == errc::unauthorized);
  BOOST_CHECK(error->message.find("ticket") != std::string::npos);
  auto ticket = fx.server->issue_ticket(0, 1);
  error.reset();
  auto first = fx.open(ticket, error);
  BOOST_CHECK(first);
  auto again = fx.open(ticket, error);
  BOOST_CHECK(!again);
  BOOST_REQUIRE(error);
  BOOST_CHECK(error->code == errc::unauthorized);
}

BOOST_AUTO_TEST_CASE(a_newer_connection_of_the_worker_closes_the_older) {
  server_fixture fx;
  maybe_failure error;
  link_events old_events, events;
  auto older = open_started(fx, 1, 1, old_events);
  BOOST_REQUIRE(send_value(*older, 1));
  auto first = fx.batches.take();
  BOOST_REQUIRE(first);
  auto newer = fx.open(fx.server->issue_ticket(1, 2), error);
  BOOST_REQUIRE(newer);
  auto lost = old_events.losses.take();
  BOOST_REQUIRE(lost);
  BOOST_CHECK(!old_events.losses.take(50ms)); // once
  BOOST_CHECK(!send_value(*older, 2));
  // The older connection's key no longer names a holder; its answer goes nowhere.
  for (int i = 0; i < 500 && fx.server->worker_of(first->key); ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_CHECK(!fx.server->worker_of(first->key));
  bulk::meta_writer fields;
  fields.i64(0);
  BOOST_CHECK(!fx.server->answer(first->key, first->request, fields));
  events.start(*newer);
  BOOST_REQUIRE(send_value(*newer, 3));
  auto b = fx.batches.take();
  BOOST_REQUIRE(b);
  BOOST_CHECK_EQUAL(fx.server->worker_of(b->key)->owner, 2u);
  fx.answer(*b, 4);
  auto a = events.answers.take();
  BOOST_REQUIRE(a);
  BOOST_CHECK_EQUAL(a->second, 4);
}

BOOST_AUTO_TEST_CASE(close_worker_and_an_overdue_answer_end_the_link) {
  server_fixture fx;
  link_events events, slow_events;
  auto link = open_started(fx, 2, 1, events);
  BOOST_REQUIRE(send_value(*link, 1));
  BOOST_REQUIRE(fx.batches.take());
  fx.server->close_worker(2);
  BOOST_CHECK(events.losses.take());

  auto slow = open_started(fx, 2, 2, slow_events);
  BOOST_REQUIRE(send_value(*slow, 1, 200ms)); // never answered
  auto lost = slow_events.losses.take();
  BOOST_REQUIRE(lost);
  BOOST_CHECK(lost->message.find("did not answer") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_malformed_batch_is_refused_by_name) {
  server_fixture fx;
  link_events events;
  auto link = open_started(fx, 0, 1, events);
  bulk::meta_writer fields;
  fields.i64(1).i64(2); // one field too many
  BOOST_REQUIRE(link->send(fields, 10s));
  auto lost = events.losses.take();
  BOOST_REQUIRE(lost);
  BOOST_CHECK(lost->code == errc::invalid_request);
  BOOST_CHECK(lost->message.find("malformed test batch") != std::string::npos);
  BOOST_CHECK(!fx.batches.take(50ms));
}

BOOST_AUTO_TEST_CASE(under_mutual_tls) {
  troupe::testing::identity_files cluster{"troupe-cluster"}, stranger{"troupe-stranger"};
  maybe_failure error;
  auto tls = bulk::tls_context::make(cluster.files, error);
  BOOST_REQUIRE(tls);
  auto foreign_tls = bulk::tls_context::make(stranger.files, error);
  BOOST_REQUIRE(foreign_tls);
  server_fixture fx{tls};
  link_events events;
  auto link = open_started(fx, 3, 1, events, tls.get());
  overlapping_batches(fx, *link, events);
  // Another CA's certificate does not get as far as the ticket.
  error.reset();
  auto foreign = fx.open(fx.server->issue_ticket(3, 2), error, foreign_tls.get());
  BOOST_CHECK(!foreign);
  BOOST_CHECK(error);
  // Nor does a peer speaking no TLS.
  error.reset();
  auto plain = fx.open(fx.server->issue_ticket(3, 3), error);
  BOOST_CHECK(!plain);
  BOOST_CHECK(error);
}

BOOST_AUTO_TEST_SUITE_END()
