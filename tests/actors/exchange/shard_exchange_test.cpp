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

// Rows [n, 2] whose rows hold their keys.
tensor row_values_of(const std::vector<int64_t>& keys) {
  tensor out({static_cast<int64_t>(keys.size()), 2});
  for (size_t i = 0; i < keys.size(); ++i)
    out.data()[2 * i] = out.data()[2 * i + 1] = static_cast<float>(keys[i]);
  return out;
}

// Shard 0 behind a bulk server: one variable "w" of 4 floats; a push adds
// its gradient and bumps the version, its receipt 1000 + its step; step 99
// is refused as stale. Its checkpoint copy (ticket 42) holds two tensors,
// each fetched once.
struct bulk_shard {
  std::mutex mutex;
  std::shared_ptr<tensor> w = std::make_shared<tensor>(shape_t{4}, 1.0f);
  int64_t version = 0;
  std::map<int32_t, tensor> copy{{0, tensor{{3}, 5.0f}}, {1, tensor{{2}, 6.0f}}};
  std::vector<std::string> events; // the pusher's calls, in order
  std::unique_ptr<bulk_server> server;

  bulk_shard() {
    bulk_endpoint endpoint;
    endpoint.fetch = [this](uint64_t r, uint64_t ticket, int32_t index, tensor& out, int64_t& v) {
      return fetch(r, ticket, index, out, v);
    };
    endpoint.pull = [this](bulk_pull& pull, bulk_pulled& out) { return answer(pull, out); };
    endpoint.open_pusher = [this] { return pusher(); };
    endpoint.max_row_keys = 1000;
    endpoint.unauthorized_push = [] {};
    bulk_server_options options;
    options.host = "127.0.0.1";
    maybe_failure error;
    server = std::make_unique<bulk_server>(std::move(endpoint), options, error);
    BOOST_REQUIRE(!error);
  }

  maybe_failure fetch(uint64_t r, uint64_t ticket, int32_t index, tensor& out, int64_t& v) {
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
  }

  maybe_failure answer(bulk_pull& pull, bulk_pulled& out) {
    std::lock_guard<std::mutex> guard{mutex};
    if (pull.run != run)
      return failure{errc::unauthorized, "another run"};
    if (!pull.names.empty() && pull.names != std::vector<std::string>{"w"})
      return failure{errc::unknown_variable, "no such variable"};
    if (!pull.names.empty())
      out.values = {std::make_shared<const tensor>(*w)};
    for (auto& rows : pull.tables) // each key's row reads the key, twice
      out.rows.push_back(row_values_of(rows.keys));
    out.version = version;
    return std::nullopt;
  }

  // Applied when handed over (rows are only counted); the answers wait
  // for await, in order. `events` says which came when.
  bulk_endpoint::pusher pusher() {
    auto answers = std::make_shared<std::deque<bulk_push_answer>>();
    return {[this, answers](bulk_push& push) {
              std::lock_guard<std::mutex> guard{mutex};
              answers->push_back(take(push));
            },
            [this, answers](bulk_push&, std::chrono::milliseconds) {
              std::lock_guard<std::mutex> guard{mutex};
              events.push_back("await");
              auto answer = answers->front();
              answers->pop_front();
              return answer;
            }};
  }

  // Under the mutex.
  bulk_push_answer take(const bulk_push& push) {
    events.push_back("hand over " + std::to_string(push.gradients.size()) + " gradient(s), "
                     + std::to_string(push.tables.size()) + " table(s)");
    bulk_push_answer answer;
    if (push.step == 99) {
      answer.refused = failure{errc::stale_gradient, "step 99 is stale"};
      return answer;
    }
    for (size_t g = 0; g < push.gradients.size(); ++g)
      for (size_t i = 0; i < w->size(); ++i)
        w->data()[i] += push.gradients[g].data()[i];
    answer.version = ++version;
    answer.receipt = 1000 + static_cast<uint64_t>(push.step);
    return answer;
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
    step_push pushed_step;
    pull_done pulled;
    push_done pushed;
  };
  std::vector<request> requests;

  void pull(int32_t, pull_request, pull_done done) override {
    requests.push_back({false, {}, std::move(done), {}});
  }
  void push(int32_t, step_push push, push_done done) override {
    requests.push_back({true, std::move(push), {}, std::move(done)});
  }
  void fetch(int32_t, uint64_t, const copy_tensor& copy, pull_done done) override {
    fetched.push_back(copy.index);
    requests.push_back({false, {}, std::move(done), {}});
  }
  std::vector<int32_t> fetched;
  void answer_pull(size_t i, float value) {
    pull_reply reply;
    reply.values.push_back(tensor{{4}, value});
    requests.at(i).pulled(reply, std::nullopt, std::nullopt);
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
  basp.requests[0].pushed({1, 2005}, std::nullopt, std::nullopt);
  basp.answer_pull(1, 2.0f);
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  BOOST_TEST(!outcomes[0].refused);
  BOOST_TEST(outcomes[0].receipt == 1005u); // each path brings its shard's receipt
  BOOST_TEST(outcomes[1].receipt == 2005u);
  BOOST_TEST(outcomes[0].values.at(0).data()[0] == 1.5f); // 1 + the pushed 0.5
  BOOST_TEST(outcomes[0].gradients.size() == 1u);         // back for reuse
  BOOST_TEST(outcomes[1].values.at(0).data()[0] == 2.0f);
}

BOOST_AUTO_TEST_CASE(a_refusal_is_the_shards_answer_on_either_path) {
  exchange.start(exchange_kind::push, {run, 0, 99, 0}, both_shards(true), false);
  basp.requests.at(0).pushed({}, failure{errc::stale_gradient, "late"}, std::nullopt);
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
  pull_reply none;
  basp.requests.at(0).pulled(none, std::nullopt, std::string{"request_timeout"});
  exchange.finish(collect());
  BOOST_REQUIRE(finished == 1);
  BOOST_TEST(outcomes[0].lost.value_or("") == "no such variable");
  BOOST_TEST(outcomes[1].lost.value_or("") == "request_timeout");
}

BOOST_AUTO_TEST_CASE(a_cancelled_exchange_ignores_late_replies_and_drops_a_broken_link) {
  exchange.start(exchange_kind::push_then_pull, {run, 0, 5, 0}, both_shards(true), true);
  exchange.cancel();
  basp.requests.at(0).pushed({}, std::nullopt, std::nullopt); // late: ignored
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

// A step's dense gradients and rows go to a shard as one push, on either
// path (the message path's carries the keys and counts as numbers); a
// pull's rows come back with its values, table by table.
BOOST_AUTO_TEST_CASE(a_parts_rows_ride_in_its_one_push_and_one_pull) {
  auto parts = both_shards(true);
  int64_t keys[2] = {3, 9};
  uint32_t counts[2] = {1, 2};
  for (auto& part : parts) {
    part_rows rows;
    rows.table = 0;
    rows.keys = bulk::key_bits(keys, 2);
    rows.counts = bulk::count_bits(counts, 2);
    rows.gradients = tensor({2, 2}, 1.0f);
    part.rows.push_back(std::move(rows));
  }
  exchange.start(exchange_kind::push, {run, 0, 4, 0}, std::move(parts), false);
  BOOST_REQUIRE(basp.requests.size() == 1u);
  auto& sent = basp.requests[0].pushed_step;
  BOOST_TEST(sent.step == 4);
  BOOST_TEST(sent.gradients.size() == 1u);
  BOOST_REQUIRE(sent.tables.size() == 1u);
  BOOST_TEST(sent.tables[0].keys == (std::vector<int64_t>{3, 9}));
  BOOST_TEST(sent.tables[0].counts == (std::vector<uint32_t>{1, 2}));
  basp.requests[0].pushed({1, 7}, std::nullopt, std::nullopt);
  exchange.finish(collect());
  BOOST_TEST(outcomes.at(0).receipt == 1004u);
  {
    std::lock_guard<std::mutex> guard{shard0.mutex};
    BOOST_TEST(shard0.events.at(0) == "hand over 1 gradient(s), 1 table(s)");
  }
  basp.requests.clear();
  parts = both_shards(false);
  parts[0].rows.push_back({0, bulk::key_bits(keys, 2), {}, {}, {}});
  exchange.start(exchange_kind::pull, {run, 0, 0, 0}, std::move(parts), false);
  basp.answer_pull(0, 3.0f);
  exchange.finish(collect());
  BOOST_REQUIRE(outcomes.at(0).rows.size() == 1u);
  BOOST_TEST(outcomes[0].rows[0].bit_equal(row_values_of({3, 9})));
  BOOST_TEST(outcomes[0].values.at(0).data()[0] == 1.5f); // after the push's 0.5
}

BOOST_AUTO_TEST_SUITE_END()
