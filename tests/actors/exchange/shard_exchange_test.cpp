// One exchange over both paths (actors/exchange/shard_exchange.hpp): a
// shard with a bulk link (a real bulk_server on 127.0.0.1, its endpoint a
// plain map here) and a shard over the message path (a fake whose replies
// the test hands in, as an actor's mailbox would). The outcome of a part
// does not depend on the path: values, the shard's refusal, or a loss.
#include <deque>
#include <map>
#include <mutex>

#include <boost/test/unit_test.hpp>

#include "actors/exchange/shard_exchange.hpp"
#include "actors/net/bulk_server.hpp"

using namespace troupe;

namespace {

constexpr uint64_t run = 7;

// Shard 0 behind a bulk server: one variable "w" of 4 floats; a push adds
// its gradient and bumps the version; step 99 is refused as stale. Its
// checkpoint copy (ticket 42) holds two tensors, each fetched once.
struct bulk_shard {
  std::mutex mutex;
  std::shared_ptr<tensor> w = std::make_shared<tensor>(shape_t{4}, 1.0f);
  int64_t version = 0;
  std::map<int32_t, tensor> copy{{0, tensor{{3}, 5.0f}}, {1, tensor{{2}, 6.0f}}};
  std::vector<std::string> events; // the pusher's calls, in order
  std::unique_ptr<bulk_server> server;

  bulk_shard() {
    bulk_endpoint endpoint;
    endpoint.fetch = [this](uint64_t r, uint64_t ticket, int32_t index, tensor& out,
                            int64_t& v) -> maybe_failure {
      std::lock_guard<std::mutex> guard{mutex};
      if (r != run || ticket != 42)
        return failure{errc::unauthorized, "no copy with that ticket"};
      auto i = copy.find(index);
      if (i == copy.end())
        return failure{errc::invalid_request, "fetched already"};
      out = std::move(i->second);
      copy.erase(i);
      v = 17;
      return std::nullopt;
    };
    endpoint.pull = [this](uint64_t r, const std::vector<std::string>& names, int32_t,
                           std::vector<std::shared_ptr<const tensor>>& pinned,
                           int64_t& v) -> maybe_failure {
      std::lock_guard<std::mutex> guard{mutex};
      if (r != run)
        return failure{errc::unauthorized, "another run"};
      if (names != std::vector<std::string>{"w"})
        return failure{errc::unknown_variable, "no such variable"};
      pinned = {std::make_shared<const tensor>(*w)};
      v = version;
      return std::nullopt;
    };
    // Applied when handed over (rows are only counted); the answers wait
    // for await, in order. `events` says which came when.
    endpoint.open_pusher = [this]() -> bulk_endpoint::pusher {
      auto answers = std::make_shared<std::deque<bulk_push_answer>>();
      return {[this, answers](bulk_push& push) {
                std::lock_guard<std::mutex> guard{mutex};
                bool rows = push.table >= 0;
                events.push_back(rows ? "hand over rows" : "hand over");
                bulk_push_answer answer;
                if (push.step == 99) {
                  answer.refused = failure{errc::stale_gradient, "step 99 is stale"};
                } else if (rows) {
                  answer.version = version;
                } else {
                  for (size_t i = 0; i < w->size(); ++i)
                    w->data()[i] += push.gradients.at(0).data()[i];
                  answer.version = ++version;
                }
                answers->push_back(answer);
              },
              [this, answers](bulk_push&, std::chrono::milliseconds) {
                std::lock_guard<std::mutex> guard{mutex};
                events.push_back("await");
                auto answer = answers->front();
                answers->pop_front();
                return answer;
              }};
    };
    endpoint.max_row_keys = [] { return int64_t{1000}; };
    endpoint.unauthorized_push = [] {};
    bulk_server_options options;
    options.host = "127.0.0.1";
    maybe_failure error;
    server = std::make_unique<bulk_server>(std::move(endpoint), options, error);
    BOOST_REQUIRE(!error);
  }

  std::unique_ptr<bulk_link> link() {
    maybe_failure error;
    auto out = bulk_link::open("127.0.0.1", server->port(), run, server->issue_ticket(0), "test",
                               std::chrono::steady_clock::now() + std::chrono::seconds(5), error);
    BOOST_REQUIRE(!error);
    return out;
  }
};

// Shard 1 over the message path: requests wait until the test answers them.
struct fake_messages : message_path {
  struct request {
    bool push;
    std::vector<tensor> gradients;
    pull_done pulled;
    push_done pushed;
  };
  std::vector<request> requests;

  void pull(int32_t, uint64_t, const std::vector<std::string>&, wire_precision,
            pull_done done) override {
    requests.push_back({false, {}, std::move(done), {}});
  }
  void push(int32_t, const push_header&, const std::vector<std::string>&,
            std::vector<tensor> gradients, push_done done) override {
    requests.push_back({true, std::move(gradients), {}, std::move(done)});
  }
  void fetch(int32_t, uint64_t, const copy_tensor& copy, pull_done done) override {
    fetched.push_back(copy.index);
    requests.push_back({false, {}, std::move(done), {}});
  }
  std::vector<int32_t> fetched;
  void answer_pull(size_t i, float value) {
    std::vector<tensor> values{tensor{{4}, value}};
    requests.at(i).pulled(values, std::nullopt, std::nullopt);
  }
};

const std::vector<std::string> names{"w"};

std::vector<exchange_part> both_shards(bool with_gradients) {
  std::vector<exchange_part> parts(2);
  for (int32_t s = 0; s < 2; ++s) {
    parts[s].shard = s;
    parts[s].names = &names;
    if (with_gradients)
      parts[s].gradients = {tensor{{4}, 0.5f}};
  }
  return parts;
}

struct fixture {
  bulk_shard shard0;
  fake_messages basp;
  shard_exchange exchange{basp, std::chrono::seconds(5)};
  std::vector<part_outcome> outcomes;
  int finished = 0;

  fixture() {
    exchange.reset_links(2);
    exchange.set_link(0, shard0.link());
  }
  shard_exchange::finished collect() {
    return [this](std::vector<part_outcome>& out) {
      outcomes = std::move(out);
      ++finished;
    };
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(shard_exchange_tests, fixture)

BOOST_AUTO_TEST_CASE(a_pull_finishes_once_both_paths_answered) {
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, both_shards(false), false);
  BOOST_REQUIRE(basp.requests.size() == 1u); // shard 0 went over its link
  exchange.finish(collect());
  BOOST_TEST(finished == 0); // the message path's reply is still due
  basp.answer_pull(0, 3.0f);
  BOOST_REQUIRE(finished == 1);
  BOOST_REQUIRE(outcomes.size() == 2u);
  BOOST_TEST(!outcomes[0].lost);
  BOOST_TEST(outcomes[0].values.at(0).data()[0] == 1.0f);
  BOOST_TEST(outcomes[1].values.at(0).data()[0] == 3.0f);
  BOOST_TEST(!exchange.active());
}

BOOST_AUTO_TEST_CASE(a_fetch_brings_one_copy_tensor_on_either_path_each_once) {
  std::vector<exchange_part> parts(2);
  for (int32_t s = 0; s < 2; ++s) {
    parts[s].shard = s;
    parts[s].copy = {42, 1};
  }
  exchange.start(exchange_kind::fetch, {run, -1, 0, 0}, parts, false);
  BOOST_REQUIRE(basp.fetched == std::vector<int32_t>{1}); // shard 1 over the message path
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  BOOST_TEST(!outcomes[0].lost);
  BOOST_REQUIRE(outcomes[0].values.size() == 1u);
  BOOST_TEST(outcomes[0].values[0].size() == 2u); // tensor 1 of the copy, over the bulk link
  BOOST_TEST(outcomes[0].values[0].data()[0] == 6.0f);
  // Fetched once: a second fetch of the same tensor is refused, a loss.
  basp.requests.clear();
  exchange.start(exchange_kind::fetch, {run, -1, 0, 0}, parts, false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_TEST(outcomes[0].lost.has_value());
  // A wrong ticket opens nothing.
  parts[0].copy = {41, 0};
  basp.requests.clear();
  exchange.start(exchange_kind::fetch, {run, -1, 0, 0}, parts, false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_TEST(outcomes[0].lost.has_value());
}

BOOST_AUTO_TEST_CASE(a_pulls_storage_given_back_serves_the_next_pull_in_place) {
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, both_shards(false), false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  const float* storage = outcomes[0].values.at(0).data();
  exchange.give_back(0, std::move(outcomes[0].values));
  basp.requests.clear();
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, both_shards(false), false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_TEST(outcomes[0].values.at(0).data() == storage);
}

BOOST_AUTO_TEST_CASE(a_push_then_pull_in_the_background_sees_its_own_push) {
  exchange.start(exchange_kind::push_then_pull, {run, 0, 5, 0}, both_shards(true), true);
  // The message path got the push before the pull: the shard applies in order.
  BOOST_REQUIRE(basp.requests.size() == 2u);
  BOOST_TEST(basp.requests[0].push);
  BOOST_TEST(!basp.requests[1].push);
  basp.requests[0].pushed(std::nullopt, std::nullopt);
  basp.answer_pull(1, 2.0f);
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  BOOST_TEST(!outcomes[0].refused);
  BOOST_TEST(outcomes[0].values.at(0).data()[0] == 1.5f); // 1 + the pushed 0.5
  BOOST_TEST(outcomes[0].gradients.size() == 1u);         // back for reuse
  BOOST_TEST(outcomes[1].values.at(0).data()[0] == 2.0f);
}

BOOST_AUTO_TEST_CASE(a_refusal_is_the_shards_answer_on_either_path) {
  exchange.start(exchange_kind::push, {run, 0, 99, 0}, both_shards(true), false);
  basp.requests.at(0).pushed(failure{errc::stale_gradient, "late"}, std::nullopt);
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  for (auto& out : outcomes) {
    BOOST_REQUIRE(out.refused);
    BOOST_TEST(static_cast<int>(out.refused->code) == static_cast<int>(errc::stale_gradient));
    BOOST_TEST(!out.lost);
  }
  BOOST_TEST(exchange.has_link(0)); // a refusal leaves the link as it is
}

BOOST_AUTO_TEST_CASE(a_refused_pull_or_a_failed_request_is_a_loss) {
  std::vector<std::string> unknown{"v"};
  auto parts = both_shards(false);
  parts[0].names = &unknown;
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, std::move(parts), false);
  std::vector<tensor> none;
  basp.requests.at(0).pulled(none, std::nullopt, std::string{"request_timeout"});
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  BOOST_TEST(outcomes[0].lost.value_or("") == "no such variable");
  BOOST_TEST(outcomes[1].lost.value_or("") == "request_timeout");
}

BOOST_AUTO_TEST_CASE(a_cancelled_exchange_ignores_late_replies_and_drops_a_broken_link) {
  exchange.start(exchange_kind::push_then_pull, {run, 0, 5, 0}, both_shards(true), true);
  exchange.cancel();
  basp.requests.at(0).pushed(std::nullopt, std::nullopt); // late: ignored
  basp.answer_pull(1, 2.0f);
  BOOST_TEST(!exchange.active());
  exchange.finish(collect());
  BOOST_TEST(finished == 1);
  BOOST_TEST(outcomes.empty());
  // The background exchange was shut down mid-way or had finished: either
  // way a new exchange works, over a new link where the old one broke.
  if (!exchange.has_link(0))
    exchange.set_link(0, shard0.link());
  basp.requests.clear();
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, both_shards(false), false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_TEST(finished == 2);
  BOOST_TEST(!outcomes.at(0).lost);
}

// A push of rows with another push behind it on the connection (a step's
// rows, then its dense gradients): both reach the shard before the first
// answer is awaited, so the shard takes them at one wake-up, and they are
// answered in order. A dense push is never followed that way (it holds the
// inbound turn a second would wait for), and a pull read ahead is answered
// after the push before it, from the values that push made.
BOOST_AUTO_TEST_CASE(a_steps_two_pushes_reach_the_shard_before_either_is_awaited) {
  bulk_shard shard;
  auto link = shard.link();
  int64_t key = 3;
  uint32_t count = 1;
  auto keys = bulk::key_bits(&key, 1);
  auto counts = bulk::count_bits(&count, 1);
  tensor row_grads({1, 2}, 1.0f);
  std::vector<tensor> grads{tensor{{4}, 0.5f}};
  auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(5); };
  link->start_push_rows(run, 0, 1, 0, 0, {&keys, &counts, &row_grads});
  link->start_push(run, 0, 1, 0, names, grads);
  complete_all({link.get()}, soon());
  BOOST_TEST(!link->error(0));
  BOOST_TEST(!link->error(1));
  BOOST_TEST(link->version(1) == 1);
  auto events = [&] {
    std::lock_guard<std::mutex> guard{shard.mutex};
    auto out = shard.events;
    shard.events.clear();
    return out;
  };
  BOOST_TEST(events()
               == (std::vector<std::string>{"hand over rows", "hand over", "await", "await"}),
             boost::test_tools::per_element());

  link->start_push(run, 0, 2, 0, names, grads);
  link->start_push(run, 0, 3, 0, names, grads);
  complete_all({link.get()}, soon());
  BOOST_TEST(!link->error(0));
  BOOST_TEST(link->version(1) == 3);
  BOOST_TEST(events() == (std::vector<std::string>{"hand over", "await", "hand over", "await"}),
             boost::test_tools::per_element());

  link->start_push_rows(run, 0, 4, 0, 0, {&keys, &counts, &row_grads});
  link->start_pull(run, names, {});
  complete_all({link.get()}, soon());
  BOOST_TEST(!link->error(0));
  BOOST_REQUIRE(!link->error(1));
  BOOST_TEST(link->values(1).at(0).data()[0] == 2.5f); // 1 + 3 pushes of 0.5
  BOOST_TEST(events() == (std::vector<std::string>{"hand over rows", "await"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
