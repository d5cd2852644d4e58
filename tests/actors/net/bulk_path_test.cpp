// The bulk path through a real shard and real sockets: pulls and pushes give
// what BASP gives, bit for bit; the ticket is required; a stranger's bytes,
// another run's requests and a lost shard are refused or reported, never
// obeyed, and the shard goes on serving its peers.
#include <sys/socket.h>

#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/background_exchange.hpp"
#include "actors/net/bulk_client.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/ps/ps_shard.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

constexpr run_id the_run = 77;

struct cfg_with_protocol : caf::actor_system_config {
  cfg_with_protocol() {
    load<caf::io::middleman>();
    register_protocol(*this);
  }
};

bulk::deadline soon() {
  return std::chrono::steady_clock::now() + 10s;
}

// A shard with a bulk path on 127.0.0.1, initialised by `chief` with
// finite values of every kind: denormals, signed zero, huge, and 4 MB of
// random bits made finite.
struct bulk_shard {
  cfg_with_protocol cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor chief{sys};
  ps_shard_actor shard;
  std::vector<std::string> names{"special", "big"};
  std::vector<tensor> values;
  uint16_t port = 0;

  bulk_shard() {
    ps_shard_config config{0, plain_sgd(0.5)};
    config.bulk_host = "127.0.0.1";
    shard = sys.spawn(ps_shard, config);
    values.push_back(
      tensor({4}, std::vector<float>{1e-40f, -0.0f, std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::denorm_min()}));
    std::mt19937 rng(3);
    std::vector<float> big(1'000'000);
    for (auto& v : big) {
      uint32_t bits = rng() & 0xbfffffffu; // exponent below all-ones: finite
      std::memcpy(&v, &bits, 4);
    }
    values.push_back(tensor({1000, 1000}, std::move(big)));
    chief->request(shard, 10s, init_atom::value, the_run, names, values, shard_options{})
      .receive([](caf::ok_atom) {}, [](caf::error& e) { BOOST_FAIL(describe(e)); });
    ticket_for(0);
    BOOST_REQUIRE(port != 0);
  }

  // A ticket for one connection whose pushes are `worker`'s.
  uint64_t ticket_for(int32_t worker) {
    uint64_t ticket = 0;
    chief->request(shard, 10s, bulk_atom::value, the_run, worker)
      .receive([&](uint16_t p, uint64_t t) { port = p, ticket = t; },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return ticket;
  }
  ~bulk_shard() { chief->send(shard, stop_atom::value); }

  std::unique_ptr<bulk_link> open(uint64_t with_ticket, maybe_failure& error) {
    return bulk_link::open("127.0.0.1", port, the_run, with_ticket, "test", soon(), error);
  }

  pull_reply basp_pull() {
    pull_reply out;
    chief->request(shard, 10s, pull_atom::value, pull_request{the_run, names, 0, {}})
      .receive([&](pull_reply& r) { out = std::move(r); },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return out;
  }
};

void pull(bulk_link& link, run_id run, const std::vector<std::string>& names) {
  link.start_pull(run, names, {}, {});
  complete_all({&link}, soon());
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(bulk_path, bulk_shard)

BOOST_AUTO_TEST_CASE(pulls_and_pushes_match_basp_bit_for_bit) {
  maybe_failure error;
  auto link = open(ticket_for(0), error);
  BOOST_REQUIRE_MESSAGE(link, (error ? error->message : ""));
  BOOST_TEST(link->shard() == 0);
  pull(*link, the_run, names);
  BOOST_REQUIRE(!link->error());
  BOOST_TEST(link->version() == 0);
  for (size_t i = 0; i < values.size(); ++i)
    BOOST_TEST(link->values()[i].bit_equal(values[i]), names[i]);
  // A push over the bulk path is applied once, as over BASP: v - 0.5 g.
  std::vector<tensor> grads{tensor({4}, 2.0f), tensor({1000, 1000}, 0.125f)};
  link->start_push(the_run, 0, 0, 0, names, grads, {});
  complete_all({link.get()}, soon());
  BOOST_REQUIRE(!link->error());
  BOOST_TEST(link->version() == 1);
  auto over_basp = basp_pull();
  pull(*link, the_run, names);
  BOOST_REQUIRE(!link->error());
  BOOST_TEST(link->version() == over_basp.version);
  for (size_t i = 0; i < values.size(); ++i) {
    BOOST_TEST(link->values()[i].bit_equal(over_basp.values[i]), names[i]);
    BOOST_TEST(over_basp.values[i][1] == values[i][1] - 0.5f * grads[i][1]);
  }
  // The same step pushed again (by another worker it was granted to after
  // the first was lost) is not applied again: async, a step applies once.
  auto second = open(ticket_for(1), error);
  BOOST_REQUIRE(second);
  second->start_push(the_run, 1, 0, 0, names, grads, {});
  complete_all({second.get()}, soon());
  BOOST_REQUIRE(!second->error());
  BOOST_TEST(second->version() == 1);
}

BOOST_AUTO_TEST_CASE(refusals_are_answers_and_the_link_stays_open) {
  maybe_failure error;
  auto link = open(ticket_for(0), error);
  BOOST_REQUIRE(link);
  pull(*link, the_run + 1, names); // another run
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::unauthorized));
  BOOST_TEST(!link->broken());
  pull(*link, the_run, {"no_such_variable"});
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::unknown_variable));
  std::vector<tensor> bad{tensor({4}, std::numeric_limits<float>::quiet_NaN()),
                          tensor({1000, 1000}, 0.0f)};
  link->start_push(the_run, 0, 5, 0, names, bad, {});
  complete_all({link.get()}, soon());
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::non_finite_gradient));
  pull(*link, the_run, names);
  BOOST_REQUIRE(!link->error());
  BOOST_TEST(link->version() == 0);
  BOOST_TEST(link->values()[0].bit_equal(values[0]));
}

BOOST_AUTO_TEST_CASE(strangers_are_refused_and_the_shard_serves_on) {
  maybe_failure error;
  auto ticket = ticket_for(0);
  auto stranger = open(ticket + 1, error);
  BOOST_TEST(!stranger);
  BOOST_REQUIRE(error);
  BOOST_TEST((error->code == errc::unauthorized));
  BOOST_TEST(error->message.find("ticket") != std::string::npos, error->message);
  // Bytes that are no frame at all, and a frame announcing a terabyte before
  // any ticket: the connection is closed, nothing is allocated.
  // Issue 25: 300 hellos each claiming a 1 MiB meta section grew a shard by
  // 265 MB: a hello's meta is bounded to a few KiB, and read as it arrives.
  for (std::string junk : {std::string("GET / HTTP/1.1\r\n\r\n") + std::string(20, ' '),
                           std::string(8, '\xff') + std::string(24, '\0'), std::string("meta")}) {
    error.reset();
    bulk::channel fd{bulk::connect_to("127.0.0.1", port, soon(), error)};
    BOOST_REQUIRE(fd);
    if (junk[0] == '\xff' || junk == "meta") {
      bulk::frame_header head;
      head.kind = static_cast<uint16_t>(bulk::frame_kind::hello);
      if (junk == "meta")
        head.meta_bytes = 1u << 20;
      else
        head.data_bytes = uint64_t{1} << 40;
      junk = std::string(reinterpret_cast<const char*>(&head), sizeof(head))
             + std::string(1000, 'x');
    }
    BOOST_REQUIRE(::send(fd.fd(), junk.data(), junk.size(), MSG_NOSIGNAL) > 0);
    bulk::frame_reader reply{{}};
    auto closed = bulk::receive_frame(fd, reply, soon());
    BOOST_TEST(closed.has_value()); // closed (or refused), never served
  }
  auto friend_link = open(ticket, error);
  BOOST_REQUIRE(friend_link);
  pull(*friend_link, the_run, names);
  BOOST_TEST(!friend_link->error());
  // A ticket opens one connection: one read off the wire is spent already.
  error.reset();
  BOOST_TEST(!open(ticket, error));
  BOOST_REQUIRE(error);
  BOOST_TEST((error->code == errc::unauthorized));
}

// Issue 25: a peer that got a connection for one worker (or for reading)
// cannot push as another; the refusal is counted for the final line.
BOOST_AUTO_TEST_CASE(a_connection_pushes_only_as_the_worker_its_ticket_names) {
  maybe_failure error;
  std::vector<tensor> grads{tensor({4}, 2.0f), tensor({1000, 1000}, 0.125f)};
  for (int32_t owner : {1, -1}) {
    auto link = open(ticket_for(owner), error);
    BOOST_REQUIRE(link);
    link->start_push(the_run, 0, 7, 0, names, grads, {});
    complete_all({link.get()}, soon());
    BOOST_REQUIRE(link->error());
    BOOST_TEST((link->error()->code == errc::unauthorized));
    BOOST_TEST(link->error()->message.find("worker:0") != std::string::npos,
               link->error()->message);
  }
  BOOST_TEST(basp_pull().version == 0);
  shard_traffic stats;
  chief->request(shard, 10s, stats_atom::value)
    .receive([&](shard_traffic& t) { stats = t; }, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_TEST(stats.unauthorized_pushes == 2u);
}

BOOST_AUTO_TEST_CASE(a_lost_shard_breaks_the_link_within_the_deadline) {
  maybe_failure error;
  auto link = open(ticket_for(0), error);
  BOOST_REQUIRE(link);
  chief->send_exit(shard, caf::exit_reason::kill);
  chief->wait_for(shard);
  auto started = std::chrono::steady_clock::now();
  link->start_pull(the_run, names, {}, {});
  complete_all({link.get()}, std::chrono::steady_clock::now() + 5s);
  BOOST_REQUIRE(link->error());
  BOOST_TEST(link->broken());
  BOOST_TEST((std::chrono::steady_clock::now() - started < 5s));
}

BOOST_AUTO_TEST_CASE(a_pull_in_the_background_gives_what_a_pull_in_the_foreground_gives) {
  maybe_failure error;
  auto link = open(ticket_for(0), error);
  BOOST_REQUIRE(link);
  background_exchange runner;
  link->start_pull(the_run, names, {}, {});
  runner.start({link.get()}, 10s);
  auto over_basp = basp_pull(); // the shard serves both at once
  runner.wait();
  BOOST_REQUIRE(!link->error());
  for (size_t i = 0; i < values.size(); ++i)
    BOOST_TEST(link->values()[i].bit_equal(over_basp.values[i]), names[i]);
  // The same link runs again, in the background or not.
  link->start_pull(the_run, names, {}, std::move(link->values()));
  runner.start({link.get()}, 10s);
  runner.wait();
  BOOST_TEST(!link->error());
  BOOST_TEST(link->values()[1].bit_equal(values[1]));
}

BOOST_AUTO_TEST_SUITE_END()

// A shard that lets a peer in and then never answers: cancelling a pull to
// it in the background ends at once, long before the deadline.
BOOST_AUTO_TEST_CASE(a_cancelled_background_pull_ends_at_once_and_breaks_its_link) {
  maybe_failure error;
  uint16_t port = 0;
  auto listener = bulk::listen_on("127.0.0.1", port, error);
  BOOST_REQUIRE(listener);
  std::thread silent([&] {
    bulk::channel peer{bulk::socket_fd{::accept(listener.get(), nullptr, nullptr)}};
    bulk::frame_reader hello{{0, 0}};
    bulk::prepare(peer.fd());
    if (bulk::receive_frame(peer, hello, soon()))
      return;
    bulk::meta_writer meta;
    meta.i32(0);
    bulk::frame_writer welcome{bulk::frame_kind::welcome, hello.header().request, meta};
    bulk::send_frame(peer, welcome, soon());
    bulk::frame_reader rest{{}}; // until the peer goes
    while (!bulk::receive_frame(peer, rest, soon()))
      rest.next();
  });
  auto link = bulk_link::open("127.0.0.1", port, the_run, 1, "test", soon(), error);
  BOOST_REQUIRE_MESSAGE(link, (error ? error->message : ""));
  background_exchange runner;
  link->start_pull(the_run, {"w"}, {}, {});
  auto started = std::chrono::steady_clock::now();
  runner.start({link.get()}, 30s);
  std::this_thread::sleep_for(50ms);
  runner.cancel();
  BOOST_TEST((std::chrono::steady_clock::now() - started < 5s));
  BOOST_TEST(link->broken());
  link.reset();
  silent.join();
}

namespace {

// A shard holding one embedding table (dim 2, SGD at 0.5, rows starting at
// zero, at most 8 keys a request), with its bulk path on 127.0.0.1.
struct rows_shard {
  cfg_with_protocol cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor chief{sys};
  ps_shard_actor shard;
  uint16_t port = 0;

  rows_shard() {
    ps_shard_config config{0, plain_sgd(0.5)};
    config.bulk_host = "127.0.0.1";
    shard = sys.spawn(ps_shard, config);
    table_setup table;
    table.table.name = "ids";
    table.table.dim = 2;
    table.table.init.kind = row_initializer::zeros;
    table.table.optimizer.kind = sparse_optimizer_kind::sgd;
    table.table.optimizer.learning_rate = 0.5;
    table.max_keys = 8;
    shard_options options;
    options.tables.push_back(table);
    options.shards = 1;
    chief
      ->request(shard, 10s, init_atom::value, the_run, std::vector<std::string>{},
                std::vector<tensor>{}, options)
      .receive([](caf::ok_atom) {}, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  }
  ~rows_shard() { chief->send(shard, stop_atom::value); }

  std::unique_ptr<bulk_link> open(int32_t worker) {
    uint64_t ticket = 0;
    chief->request(shard, 10s, bulk_atom::value, the_run, worker)
      .receive([&](uint16_t p, uint64_t t) { port = p, ticket = t; },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    maybe_failure error;
    auto link = bulk_link::open("127.0.0.1", port, the_run, ticket, "test", soon(), error);
    BOOST_REQUIRE_MESSAGE(link, (error ? error->message : ""));
    return link;
  }

  tensor basp_rows(const std::vector<int64_t>& keys) {
    tensor out;
    chief->request(shard, 10s, pull_atom::value, pull_request{the_run, {}, 0, {{0, keys}}})
      .receive([&](pull_reply& reply) { out = std::move(reply.rows.at(0)); },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    return out;
  }
};

// One table's keys (and a push's counts and gradients) as a request carries them.
struct table_bits {
  tensor keys, counts;
  table_bits(const std::vector<int64_t>& k, const std::vector<uint32_t>& c = {})
    : keys(bulk::key_bits(k.data(), k.size())), counts(bulk::count_bits(c.data(), c.size())) {}
  bulk_link::table_part part(const tensor* grads = nullptr, int32_t table = 0) const {
    return {table, &keys, &counts, grads};
  }
};

// A pull of `keys` over `link`; its rows, or an empty tensor when refused.
tensor pull_rows(bulk_link& link, run_id run, const std::vector<int64_t>& keys) {
  table_bits bits(keys);
  link.start_pull(run, {}, {bits.part()}, {});
  complete_all({&link}, soon());
  return link.error() ? tensor{} : link.values().at(0);
}

void push_rows(bulk_link& link, int32_t worker, int64_t step, const std::vector<int64_t>& keys,
               const std::vector<uint32_t>& counts, const tensor& grads) {
  table_bits bits(keys, counts);
  link.start_push(the_run, worker, step, 0, {}, {}, {bits.part(&grads)});
  complete_all({&link}, soon());
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(bulk_rows, rows_shard)

// Issue 28: rows travel on the bulk path as workers send them, with the
// answers BASP gives: the same rows bit for bit, the same checks.
BOOST_AUTO_TEST_CASE(rows_pulled_and_pushed_on_the_bulk_path_match_basp) {
  auto link = open(0);
  std::vector<int64_t> keys{3, 17, int64_t{1} << 40};
  auto before = pull_rows(*link, the_run, keys);
  BOOST_REQUIRE(!link->error());
  BOOST_TEST((before.shape() == shape_t{3, 2}));
  BOOST_TEST(before.bit_equal(tensor({3, 2}, 0.0f))); // an unseen key reads its initial row
  tensor grads({3, 2}, std::vector<float>{1, 2, 3, 4, 5, -6});
  push_rows(*link, 0, 0, keys, {1, 2, 1}, grads);
  BOOST_REQUIRE_MESSAGE(!link->error(), link->error()->message);
  auto after = pull_rows(*link, the_run, keys);
  BOOST_REQUIRE(!link->error());
  BOOST_TEST(after.bit_equal(basp_rows(keys)));
  for (size_t i = 0; i < 6; ++i)
    BOOST_TEST(after.data()[i] == -0.5f * grads.data()[i]);
  // Keys in another order come back in that order.
  auto reversed = pull_rows(*link, the_run, {keys[2], keys[0]});
  BOOST_TEST(reversed.data()[0] == after.data()[4]);
  BOOST_TEST(reversed.data()[3] == after.data()[1]);
  // An empty push (a sync step's shard that owns none of a batch's keys).
  push_rows(*link, 0, 1, {}, {}, tensor({0, 2}));
  BOOST_TEST(!link->error());
}

// A worker's requests to a shard may go together (a step's push, then the
// next step's pull): the shard answers them in order, each with its own
// outcome, and a refusal is one request's answer, not the others'.
BOOST_AUTO_TEST_CASE(requests_sent_together_are_answered_in_order_each_with_its_own_outcome) {
  auto link = open(0);
  table_bits two({3, 17}, {1, 1});
  table_bits nine({1, 2, 3, 4, 5, 6, 7, 8, 9});
  tensor grads({2, 2}, std::vector<float>{1, 2, 3, -4});
  link->start_push(the_run, 0, 0, 0, {}, {}, {two.part(&grads)});
  link->start_pull(the_run, {}, {nine.part()}, {}); // the table takes 8 keys a request
  link->start_pull(the_run, {}, {two.part()}, {});
  complete_all({link.get()}, soon());
  BOOST_TEST(!link->error(0));
  BOOST_REQUIRE(link->error(1));
  BOOST_TEST((link->error(1)->code == errc::invalid_request));
  BOOST_TEST(!link->lost(1));
  BOOST_REQUIRE(!link->error(2));
  auto& rows = link->values(2).at(0); // the push before it applied
  BOOST_REQUIRE((rows.shape() == shape_t{2, 2}));
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(rows.data()[i] == -0.5f * grads.data()[i]);
  BOOST_TEST(!link->broken());
  // A request after the link was driven begins an exchange of its own.
  BOOST_TEST(pull_rows(*link, the_run, {3, 17}).bit_equal(basp_rows({3, 17})));

  // A request the shard cannot read (a table numbered -1) is refused and
  // closes the connection: what was sent behind it is lost, not answered.
  link->start_push(the_run, 0, 1, 0, {}, {}, {two.part(&grads, -1)});
  link->start_pull(the_run, {}, {two.part()}, {});
  complete_all({link.get()}, soon());
  BOOST_REQUIRE(link->error(0));
  BOOST_TEST(!link->lost(0), link->error(0)->message);
  BOOST_TEST(link->error(0)->message.find("malformed") != std::string::npos);
  BOOST_REQUIRE(link->error(1));
  BOOST_TEST(link->lost(1));
  BOOST_TEST(link->broken());
}

BOOST_AUTO_TEST_CASE(row_requests_are_checked_as_over_basp_and_the_link_serves_on) {
  auto link = open(0);
  std::vector<int64_t> nine{1, 2, 3, 4, 5, 6, 7, 8, 9};
  pull_rows(*link, the_run, nine); // the table takes 8 keys a request
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::invalid_request));
  BOOST_TEST(link->error()->message.find("8") != std::string::npos, link->error()->message);
  BOOST_TEST(!link->broken());
  pull_rows(*link, the_run + 1, {1}); // another run
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::unauthorized));
  push_rows(*link, 0, 0, {1, 1}, {1, 1}, tensor({2, 2}, 1.0f)); // a key twice
  BOOST_REQUIRE(link->error());
  push_rows(*link, 0, 1, {1}, {1}, tensor({1, 2}, std::numeric_limits<float>::quiet_NaN()));
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::non_finite_gradient));
  // Rows pushed as another worker than the ticket's: refused, counted.
  push_rows(*link, 1, 2, {1}, {1}, tensor({1, 2}, 1.0f));
  BOOST_REQUIRE(link->error());
  BOOST_TEST((link->error()->code == errc::unauthorized));
  shard_traffic stats;
  chief->request(shard, 10s, stats_atom::value)
    .receive([&](shard_traffic& t) { stats = t; }, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_TEST(stats.unauthorized_pushes == 1u);
  // Nothing refused was applied.
  BOOST_TEST(pull_rows(*link, the_run, {1}).bit_equal(tensor({1, 2}, 0.0f)));
}

// Issue 52: a process with a ticket for worker 0 replayed a captured row
// push 50 times and each moved the rows. The bulk door takes a step once,
// as BASP does, whichever connection the replays come on.
BOOST_AUTO_TEST_CASE(a_row_push_replayed_on_the_bulk_path_moves_the_rows_once) {
  auto link = open(0);
  tensor grads({1, 2}, std::vector<float>{1, -2});
  push_rows(*link, 0, 5, {4}, {1}, grads);
  BOOST_REQUIRE_MESSAGE(!link->error(), link->error()->message);
  auto once = pull_rows(*link, the_run, {4});
  BOOST_TEST(once.bit_equal(tensor({1, 2}, std::vector<float>{-0.5f, 1.0f})));
  auto forger = open(0); // a second admission of the same worker
  for (int replay = 0; replay < 50; ++replay)
    push_rows(replay % 2 ? *link : *forger, 0, 5, {4}, {1}, grads);
  BOOST_TEST(pull_rows(*link, the_run, {4}).bit_equal(once));
  shard_traffic stats;
  chief->request(shard, 10s, stats_atom::value)
    .receive([&](shard_traffic& t) { stats = t; }, [](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_TEST(stats.updates == 1);
  BOOST_TEST(stats.repeated_pushes == 50u);
}

// A request naming more keys than a shard takes is refused from its header
// and shapes, before a byte of its keys is read or allocated: 10^9 keys
// (8 GB) pass no frame limit; 2^25 keys (256 MiB) pass the frame's but not
// the rows' bound. The shard serves on.
BOOST_AUTO_TEST_CASE(a_request_for_too_many_keys_is_refused_before_its_keys_are_read) {
  auto link = open(0);
  for (int64_t keys : {int64_t{1'000'000'000}, int64_t{1} << 25}) {
    uint64_t ticket = 0;
    chief->request(shard, 10s, bulk_atom::value, the_run, int32_t{0})
      .receive([&](uint16_t, uint64_t t) { ticket = t; },
               [](caf::error& e) { BOOST_FAIL(describe(e)); });
    maybe_failure error;
    bulk::channel ch{bulk::connect_to("127.0.0.1", port, soon(), error)};
    BOOST_REQUIRE(ch);
    bulk::meta_writer hello;
    hello.u64(the_run).u64(ticket).text("raw");
    bulk::frame_writer greeting{bulk::frame_kind::hello, 0, hello};
    BOOST_REQUIRE(!bulk::send_frame(ch, greeting, soon()));
    bulk::frame_reader in{{}};
    BOOST_REQUIRE(!bulk::receive_frame(ch, in, soon())); // welcome
    bulk::frame_header head;
    head.kind = static_cast<uint16_t>(bulk::frame_kind::pull);
    head.request = 1;
    std::string meta;
    auto put = [&](const void* p, size_t n) { meta.append(static_cast<const char*>(p), n); };
    uint32_t count = 1, rank = 2, no_names = 0;
    int64_t two = 2;
    int32_t precision = 0, tables = 1, table = 0;
    put(&count, 4), put(&rank, 4), put(&keys, 8), put(&two, 8), put(&the_run, 8);
    put(&no_names, 4), put(&precision, 4), put(&tables, 4), put(&table, 4);
    head.meta_bytes = static_cast<uint32_t>(meta.size());
    head.data_bytes = static_cast<uint64_t>(keys) * 8; // two floats a key
    auto bytes = std::string(reinterpret_cast<const char*>(&head), sizeof(head)) + meta;
    BOOST_REQUIRE(::send(ch.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL) > 0);
    bulk::frame_reader reply{{}};
    auto closed = bulk::receive_frame(ch, reply, soon());
    if (keys < 1'000'000'000) { // the rows' bound answers, naming it
      BOOST_REQUIRE(!closed);
      BOOST_TEST(reply.header().kind == static_cast<uint16_t>(bulk::frame_kind::refusal));
      auto fields = reply.fields();
      fields.u8();
      auto message = fields.text();
      BOOST_TEST(message.find("than 16777216") != std::string::npos, message);
    } else {
      BOOST_TEST(closed.has_value()); // the frame's own limit closes it
    }
  }
  BOOST_TEST(pull_rows(*link, the_run, {1}).size() == 2u);
  BOOST_TEST(!link->error());
}

BOOST_AUTO_TEST_SUITE_END()
