// The ps shard actor, message by message on CAF's test_coordinator.
#include <cmath>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/protocol/grant_proof.hpp"
#include "actors/ps/ps_shard.hpp"
#include "tests/support/actors.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// The error a request from `from` is answered with (none if it succeeds).
template <class T, class... Ts>
caf::error error_of(caf::scheduler::test_coordinator& sched, caf::scoped_actor& from,
                    const ps_shard_actor& shard, Ts&&... xs) {
  auto handle = from->request(shard, caf::infinite, std::forward<Ts>(xs)...);
  sched.run();
  caf::error out;
  handle.receive([](T&) {}, [&](caf::error& e) { out = std::move(e); });
  return out;
}

// Sync mode: a shard averaging R = 2 gradients up to step 10 reports its
// updates to a spy token queue, whose log the test reads.
struct sync_shard_fixture : deterministic_fixture {
  std::shared_ptr<std::vector<applied_event>> log = std::make_shared<std::vector<applied_event>>();
  token_queue_actor queue = sys.spawn(spy_queue, log);

  // The shard, with one variable "w" = w and SGD at `lr`, initialised from
  // `first_step` on.
  ps_shard_actor start(double lr, tensor w, int64_t first_step = 0) {
    auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(lr)});
    sched.run();
    BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                    std::vector<tensor>{std::move(w)},
                                    sync_shard_options(queue, first_step)));
    return s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ps_shard_async, deterministic_fixture)

BOOST_AUTO_TEST_CASE(pull_and_push_semantics) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto early = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(!early);
  BOOST_TEST(is(early.error(), errc::not_initialized));
  auto early_push = push(s, test_run, 0, 0, 0, 0, names{"w"}, {tensor({2, 2}, 1.0f)});
  BOOST_REQUIRE(!early_push);
  BOOST_TEST(is(early_push.error(), errc::not_initialized));

  std::vector<tensor> init{tensor({2, 2}, 1.0f), tensor({2}, 0.5f)};
  BOOST_REQUIRE(
    ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w", "b"}, init, shard_options{}));
  auto pulled = pull(s, test_run, names{"b", "w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->version == 0);
  BOOST_TEST(pulled->values[0].bit_equal(init[1])); // in the order asked
  BOOST_TEST(pulled->values[1].bit_equal(init[0]));

  auto version = push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                      std::vector<tensor>{tensor({2, 2}, 1.0f)});
  BOOST_REQUIRE(version);
  BOOST_TEST(*version == 1);
  pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0][3] == 0.5f); // 1 - 0.5 * 1
  BOOST_TEST(pulled->version == 1);
}

// train.wire-precision: a bf16 pull answers the values packed two to a
// float, a bf16 push is widened to the variable's shape before the update,
// and the shard's traffic counts the bytes that crossed the wire. A packed
// size that does not fit the variable and an unknown precision are refused,
// the values untouched.
BOOST_AUTO_TEST_CASE(pulls_and_pushes_at_a_reduced_wire_precision) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(1.0)});
  sched.run();
  tensor w({3}, std::vector<float>{1.0f, 1.0f / 3, -2.0f});
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"}, std::vector<tensor>{w},
                                  shard_options{}));
  auto bf16 = static_cast<int32_t>(wire_precision::bf16);
  auto pulled = pull(s, test_run, names{"w"}, bf16);
  BOOST_REQUIRE(pulled);
  BOOST_REQUIRE(pulled->values[0].size() == 2u); // three bf16 values in two floats
  std::vector<float> values(3);
  BOOST_REQUIRE(!unpack(pulled->values[0], wire_precision::bf16, values.data(), 3));
  BOOST_TEST(values[0] == 1.0f);
  BOOST_TEST(values[1] == 0.333984375f); // 1/3 rounded to bf16's 8 bits of mantissa
  BOOST_TEST(values[2] == -2.0f);

  std::vector<float> g{0.5f, 1.0f + 0x1p-8f + 0x1p-12f, 0.25f};
  tensor packed;
  pack(g.data(), g.size(), wire_precision::bf16, packed);
  auto version = push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, bf16, names{"w"},
                      std::vector<tensor>{packed});
  BOOST_REQUIRE(version);
  BOOST_TEST(*version == 1);
  pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0][0] == 0.5f); // 1 - 0.5
  // The gradient as bf16 held it (1 + 2^-7), not as it was sent (1.0039...).
  BOOST_TEST(std::fabs(pulled->values[0][1] - (1.0f / 3 - (1.0f + 0x1p-7f))) < 1e-6);
  BOOST_TEST(pulled->values[0][2] == -2.25f);

  auto misfit = push(s, test_run, int32_t{0}, int64_t{1}, uint64_t{0}, bf16, names{"w"},
                     std::vector<tensor>{tensor({3}, 1.0f)});
  BOOST_REQUIRE(!misfit);
  BOOST_TEST(is(misfit.error(), errc::shape_mismatch));
  auto unknown = push(s, test_run, int32_t{0}, int64_t{1}, uint64_t{0}, int32_t{9}, names{"w"},
                      std::vector<tensor>{packed});
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(is(unknown.error(), errc::invalid_request));
  auto unknown_pull = pull(s, test_run, names{"w"}, int32_t{-1});
  BOOST_REQUIRE(!unknown_pull);
  BOOST_TEST(is(unknown_pull.error(), errc::invalid_request));
  auto after = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_TEST(after->version == 1);
  BOOST_TEST(after->values[0].bit_equal(pulled->values[0]));

  // Top-k pairs (train.push-topk): index 2 only, 0.5; the other values stay.
  std::vector<float> sparse{0.0f, 0.0f, 0.5f};
  std::vector<float> residual;
  tensor pairs;
  pack_topk(sparse.data(), 3, 0.2, residual, pairs);
  BOOST_REQUIRE(pairs.size() == 2u);
  BOOST_REQUIRE(push(s, test_run, int32_t{0}, int64_t{1}, uint64_t{0}, topk_wire_code, names{"w"},
                     std::vector<tensor>{pairs}));
  auto topk = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_TEST(topk->values[0][0] == after->values[0][0]);
  BOOST_TEST(topk->values[0][1] == after->values[0][1]);
  BOOST_TEST(topk->values[0][2] == -2.75f); // -2.25 - 0.5
  auto topk_pull = pull(s, test_run, names{"w"}, topk_wire_code);
  BOOST_TEST(is(topk_pull.error(), errc::invalid_request)); // pulls have no top-k form

  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_REQUIRE(stats);
  // In: the applied bf16 push (8 bytes), the two refused ones (12 + 8) and the top-k one (8).
  BOOST_TEST(stats->bytes_in == 8u + 12u + 8u + 8u, stats->bytes_in);
  // Out: a bf16 pull (8 bytes) and three fp32 ones (12 each); refused pulls send nothing.
  BOOST_TEST(stats->bytes_out == 8u + 3u * 12u, stats->bytes_out);
}

// A step revoked after its worker was lost, and granted again, whose first
// push had landed: the second push of it is answered but not applied, so the
// shard counts exactly the updates the chief counts.
BOOST_AUTO_TEST_CASE(an_async_step_pushed_twice_is_applied_once) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                  std::vector<tensor>{tensor({2}, 0.0f)}, shard_options{}));
  auto push_step = [&](int32_t worker, int64_t step) {
    return push(s, test_run, worker, step, uint64_t{0}, int32_t{0}, names{"w"},
                std::vector<tensor>{tensor({2}, 1.0f)});
  };
  BOOST_TEST(*push_step(0, 0) == 1);
  BOOST_TEST(*push_step(1, 1) == 2);
  BOOST_TEST(*push_step(2, 0) == 2); // step 0 again, from the worker it was granted to next
  BOOST_TEST(*push_step(2, 2) == 3);
  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0][0] == -1.5f); // three updates of -0.5, not four
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_and_change_nothing) {
  auto s = sys.spawn(ps_shard, ps_shard_config{3, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                  std::vector<tensor>{tensor({3}, 2.0f)}, shard_options{}));
  auto unknown = pull(s, test_run, names{"v"}, int32_t{0});
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(is(unknown.error(), errc::unknown_variable));
  BOOST_TEST(describe(unknown.error()).find("'v'") != std::string::npos);
  BOOST_TEST(describe(unknown.error()).find("ps:3") != std::string::npos);

  auto wrong_shape = push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                          std::vector<tensor>{tensor({4}, 1.0f)});
  BOOST_REQUIRE(!wrong_shape);
  BOOST_TEST(is(wrong_shape.error(), errc::shape_mismatch));

  tensor nan_grad({3}, 1.0f);
  nan_grad[2] = std::nanf("");
  auto nan_push = push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                       std::vector<tensor>{nan_grad});
  BOOST_REQUIRE(!nan_push);
  BOOST_TEST(is(nan_push.error(), errc::non_finite_gradient));

  auto again = ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                 std::vector<tensor>{tensor({3}, 9.0f)}, shard_options{});
  BOOST_REQUIRE(!again);
  BOOST_TEST(is(again.error(), errc::already_initialized));

  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->version == 0);
  BOOST_TEST(pulled->values[0].bit_equal(tensor({3}, 2.0f)));
}

// The first init makes its sender the shard's chief and fixes the run: a
// second would-be chief cannot re-initialise, stop, steer or read it, and
// requests of another run are refused, all with unauthorized (or
// already_initialized) and without changing anything.
BOOST_AUTO_TEST_CASE(only_its_chief_steers_it_and_only_its_run_reads_it) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                  std::vector<tensor>{tensor({2}, 1.0f)}, shard_options{}));
  caf::scoped_actor stranger{sys};
  BOOST_TEST(
    is(error_of<caf::ok_atom>(sched, stranger, s, init_atom::value, test_run + 1, names{"w"},
                              std::vector<tensor>{tensor({2}, 9.0f)}, shard_options{}),
       errc::already_initialized));
  BOOST_TEST(
    is(error_of<shard_traffic>(sched, stranger, s, stats_atom::value), errc::unauthorized));
  BOOST_TEST(is(error_of<pull_reply>(sched, stranger, s, pull_atom::value,
                                     pull_request{test_run + 1, names{"w"}, 0, {}}),
                errc::unauthorized));
  BOOST_TEST(is(
    error_of<push_receipt>(
      sched, stranger, s, push_atom::value,
      step_push{test_run + 1, 0, 0, 0, 0, names{"w"}, std::vector<tensor>{tensor({2}, 1.0f)}, {}}),
    errc::unauthorized));
  stranger->send(s, stop_atom::value);
  stranger->send(s, replicas_atom::value, int32_t{5});
  sched.run();
  auto stats = ask<shard_traffic>(s, stats_atom::value); // still alive, for its chief
  BOOST_REQUIRE(stats);
  BOOST_TEST(stats->updates == 0);
  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0].bit_equal(tensor({2}, 1.0f))); // the first init's values
}

optimizer_config adam(double rate) {
  auto c = plain_sgd(rate);
  c.kind = optimizer_kind::adam;
  return c;
}

// A checkpoint's copy: the variables and the optimizer's slots at one
// version, taken between two updates and fetched one tensor at a time, each
// once; only the chief may ask for it.
BOOST_AUTO_TEST_CASE(a_snapshot_copies_variables_and_slots_at_one_version) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, adam(0.1)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w", "b"},
                                  std::vector<tensor>{tensor({2, 3}, 1.0f), tensor({3}, 0.0f)},
                                  shard_options{}));
  auto push_step = [&](int64_t step) {
    return push(s, test_run, int32_t{0}, step, uint64_t{0}, int32_t{0}, names{"w", "b"},
                std::vector<tensor>{tensor({2, 3}, 0.5f), tensor({3}, -1.0f)});
  };
  BOOST_REQUIRE(push_step(0));
  auto before = pull(s, test_run, names{"w"}, int32_t{0});
  auto index = ask<snapshot_index>(s, snapshot_atom::value, test_run, int64_t{1});
  BOOST_REQUIRE(index);
  BOOST_TEST(index->version == 1);
  BOOST_TEST(index->names == (names{"b", "w", "b/Adam", "b/Adam_1", "w/Adam", "w/Adam_1"}));
  BOOST_TEST(index->shapes[1] == (shape_t{2, 3}));
  BOOST_TEST(index->shapes[2] == (shape_t{3}));
  BOOST_REQUIRE(push_step(1)); // training goes on; the copy stays at version 1
  auto w = ask<tensor>(s, fetch_atom::value, test_run, index->ticket, int32_t{1});
  BOOST_REQUIRE(w);
  BOOST_TEST(w->bit_equal(before->values[0]));
  auto m = ask<tensor>(s, fetch_atom::value, test_run, index->ticket, int32_t{4});
  BOOST_REQUIRE(m);
  BOOST_TEST(std::abs((*m)[0] - 0.05f) < 1e-7f); // Adam's first moment: (1 - 0.9) * 0.5
  auto again = ask<tensor>(s, fetch_atom::value, test_run, index->ticket, int32_t{1});
  BOOST_REQUIRE(!again);
  BOOST_TEST(is(again.error(), errc::invalid_request));
  auto passed = ask<snapshot_index>(s, snapshot_atom::value, test_run, int64_t{1});
  BOOST_REQUIRE(!passed);
  BOOST_TEST(is(passed.error(), errc::snapshot_passed));
  caf::scoped_actor stranger{sys};
  BOOST_TEST(
    is(error_of<snapshot_index>(sched, stranger, s, snapshot_atom::value, test_run, int64_t{2}),
       errc::unauthorized));
  BOOST_TEST(is(error_of<tensor>(sched, stranger, s, fetch_atom::value, test_run, index->ticket + 1,
                                 int32_t{0}),
                errc::unauthorized)); // without the ticket
  BOOST_TEST(is(error_of<tensor>(sched, stranger, s, fetch_atom::value, test_run + 1, index->ticket,
                                 int32_t{0}),
                errc::unauthorized)); // with it, but for another run
  BOOST_TEST(is(error_of<caf::ok_atom>(sched, stranger, s, restore_atom::value, test_run,
                                       std::string("w/Adam"), tensor({2, 3}, 0.0f)),
                errc::unauthorized));
}

// A shard restored from another's copy (values, slots, update count) goes
// on exactly as the original: the next update is bit for bit the same.
BOOST_AUTO_TEST_CASE(a_restored_shard_continues_as_the_original_would) {
  auto grads = [](float g) { return std::vector<tensor>{tensor({2, 3}, g), tensor({3}, -g)}; };
  auto original = sys.spawn(ps_shard, ps_shard_config{0, adam(0.1)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(original, init_atom::value, test_run, names{"w", "b"},
                                  std::vector<tensor>{tensor({2, 3}, 1.0f), tensor({3}, 0.0f)},
                                  shard_options{}));
  for (int64_t step = 0; step < 3; ++step)
    BOOST_REQUIRE(push(original, test_run, int32_t{0}, step, uint64_t{0}, int32_t{0},
                       names{"w", "b"}, grads(0.25f * static_cast<float>(step + 1))));
  auto index = ask<snapshot_index>(original, snapshot_atom::value, test_run, int64_t{3});
  BOOST_REQUIRE(index);
  std::vector<tensor> copy;
  for (int32_t i = 0; i < static_cast<int32_t>(index->names.size()); ++i)
    copy.push_back(*ask<tensor>(original, fetch_atom::value, test_run, index->ticket, i));
  auto restored = sys.spawn(ps_shard, ps_shard_config{1, adam(0.1)});
  sched.run();
  shard_options at_step_3;
  at_step_3.first_step = 3;
  BOOST_REQUIRE(ask<caf::ok_atom>(restored, init_atom::value, test_run, names{"b", "w"},
                                  std::vector<tensor>{copy[0], copy[1]}, at_step_3));
  for (size_t i = 2; i < copy.size(); ++i)
    BOOST_REQUIRE(
      ask<caf::ok_atom>(restored, restore_atom::value, test_run, index->names[i], copy[i]));
  auto bad_slot = ask<caf::ok_atom>(restored, restore_atom::value, test_run,
                                    std::string("w/momentum"), tensor({2, 3}, 0.0f));
  BOOST_REQUIRE(!bad_slot);
  BOOST_TEST(is(bad_slot.error(), errc::invalid_request));
  auto bad_shape = ask<caf::ok_atom>(restored, restore_atom::value, test_run, std::string("w/Adam"),
                                     tensor({3}, 0.0f));
  BOOST_REQUIRE(!bad_shape);
  BOOST_TEST(is(bad_shape.error(), errc::shape_mismatch));
  // A step below the restored one counts as applied: a late push of it is not applied.
  BOOST_TEST(*push(restored, test_run, int32_t{0}, int64_t{2}, uint64_t{0}, int32_t{0},
                   names{"w", "b"}, grads(9.0f))
             == 3);
  for (auto shard : {original, restored})
    BOOST_TEST(*push(shard, test_run, int32_t{0}, int64_t{3}, uint64_t{0}, int32_t{0},
                     names{"w", "b"}, grads(1.0f))
               == 4);
  auto a = pull(original, test_run, names{"w", "b"}, int32_t{0});
  auto b = pull(restored, test_run, names{"w", "b"}, int32_t{0});
  BOOST_TEST(a->values[0].bit_equal(b->values[0]));
  BOOST_TEST(a->values[1].bit_equal(b->values[1]));
}

// Recovery after a lost shard: the chief initialises every shard again for
// a new run; the old run's pushes are refused from then on.
BOOST_AUTO_TEST_CASE(its_chief_reinitialises_it_for_a_new_run) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                  std::vector<tensor>{tensor({2}, 1.0f)}, shard_options{}));
  BOOST_REQUIRE(push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                     std::vector<tensor>{tensor({2}, 1.0f)}));
  shard_options restored;
  restored.first_step = 40;
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run + 1, names{"w"},
                                  std::vector<tensor>{tensor({2}, 7.0f)}, restored));
  auto pulled = pull(s, test_run + 1, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->version == 40);
  BOOST_TEST(pulled->values[0][0] == 7.0f);
  auto old = push(s, test_run, int32_t{0}, int64_t{1}, uint64_t{0}, int32_t{0}, names{"w"},
                  std::vector<tensor>{tensor({2}, 1.0f)});
  BOOST_REQUIRE(!old);
  BOOST_TEST(is(old.error(), errc::unauthorized));
  // The same run again is not a recovery: init stays once per run.
  auto again = ask<caf::ok_atom>(s, init_atom::value, test_run + 1, names{"w"},
                                 std::vector<tensor>{tensor({2}, 9.0f)}, restored);
  BOOST_REQUIRE(!again);
  BOOST_TEST(is(again.error(), errc::already_initialized));
}

// The chief is lost: with a recovery timeout the shard keeps its state and
// a new chief's init replaces it; a stranger could not before.
BOOST_AUTO_TEST_CASE(a_shard_waits_for_a_new_chief_when_its_chief_is_lost) {
  ps_shard_config config{0, plain_sgd(0.5)};
  config.recovery_timeout = std::chrono::seconds(60);
  auto s = sys.spawn(ps_shard, config);
  sched.run();
  sys.spawn([s](caf::event_based_actor* me) { // the old chief: inits, then dies
    me->request(s, caf::infinite, init_atom::value, test_run, names{"w"},
                std::vector<tensor>{tensor({2}, 1.0f)}, shard_options{})
      .then([me](caf::ok_atom) { me->quit(caf::exit_reason::kill); });
  });
  sched.run();
  BOOST_TEST(!sched.has_job());
  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled); // alive, and still serving its state
  BOOST_TEST(pulled->values[0][0] == 1.0f);
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run + 5, names{"w"},
                                  std::vector<tensor>{tensor({2}, 3.0f)}, shard_options{}));
  auto stats = ask<shard_traffic>(s, stats_atom::value); // the new chief steers it now
  BOOST_REQUIRE(stats);
  self->send(s, stop_atom::value); // else it would wait for a chief after this test's
  sched.run();
}

BOOST_AUTO_TEST_CASE(hello_refuses_another_protocol_version) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto ok = ask<uint32_t>(s, hello_atom::value, protocol_version, std::string("worker"), 0);
  BOOST_REQUIRE(ok);
  BOOST_TEST(*ok == protocol_version);
  auto refused = ask<uint32_t>(s, hello_atom::value, protocol_version + 1, std::string("worker"),
                               1);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(is(refused.error(), errc::protocol_mismatch));
  BOOST_TEST(describe(refused.error()).find("worker:1") != std::string::npos);
}

// Issue 25: a peer that knows the run (or read a bulk ticket off the wire)
// replayed a worker's push with a later step and a scaled gradient, and the
// shard applied it. With the run's key, a push must show its grant's proof.
BOOST_AUTO_TEST_CASE(a_push_without_its_grants_proof_is_refused_and_counted) {
  auto s = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.5)});
  sched.run();
  auto key = grant_key::draw();
  shard_options options;
  options.grant_key0 = key.k0;
  options.grant_key1 = key.k1;
  BOOST_REQUIRE(ask<caf::ok_atom>(s, init_atom::value, test_run, names{"w"},
                                  std::vector<tensor>{tensor({2}, 1.0f)}, options));
  auto push_step = [&](int32_t worker, int64_t step, uint64_t proof, float g) {
    return push(s, test_run, worker, step, proof, int32_t{0}, names{"w"},
                std::vector<tensor>{tensor({2}, g)});
  };
  auto granted = grant_proof(key, test_run, 0, 0);
  for (auto forged :
       {push_step(0, 1, granted, 1000.0f),                                 // a later step
        push_step(1, 0, granted, 1000.0f),                                 // another worker
        push_step(0, 0, 0, 1000.0f),                                       // no proof
        push_step(0, 0, grant_proof(key, test_run + 1, 0, 0), 1000.0f)}) { // other run
    BOOST_REQUIRE(!forged);
    BOOST_TEST(is(forged.error(), errc::unauthorized));
  }
  auto real = push_step(0, 0, granted, 1.0f);
  BOOST_REQUIRE(real);
  BOOST_TEST(*real == 1);
  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_REQUIRE(pulled);
  BOOST_TEST(pulled->values[0][0] == 0.5f); // 1 - 0.5 * 1: none of the forged ones
  auto stats = ask<shard_traffic>(s, stats_atom::value);
  BOOST_REQUIRE(stats);
  BOOST_TEST(stats->unauthorized_pushes == 4u);
  BOOST_TEST(stats->updates == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(ps_shard_sync, sync_shard_fixture)

// R = 2 of N = 3: nothing is applied before the second gradient, the update
// happens exactly then, and the third (backup) worker's late gradient is
// dropped and answered stale.
BOOST_AUTO_TEST_CASE(shard_applies_at_the_rth_gradient_and_drops_stale_ones) {
  auto s = start(0.5, tensor({2}, 1.0f));
  auto first = push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                    std::vector<tensor>{tensor({2}, 2.0f)});
  BOOST_REQUIRE(first);
  BOOST_TEST(*first == 0);
  auto pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_TEST(pulled->values[0][0] == 1.0f); // not applied yet
  BOOST_TEST(log->empty());
  auto second = push(s, test_run, int32_t{1}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                     std::vector<tensor>{tensor({2}, 4.0f)});
  BOOST_REQUIRE(second);
  BOOST_TEST(*second == 1);
  pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_TEST(pulled->values[0][0] == 1.0f - 0.5f * 3.0f); // the mean, applied once
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->at(0).step == 1);
  auto late = push(s, test_run, int32_t{2}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                   std::vector<tensor>{tensor({2}, 100.0f)});
  BOOST_REQUIRE(!late);
  BOOST_TEST(is(late.error(), errc::stale_gradient));
  BOOST_TEST(describe(late.error()).find("worker:2") != std::string::npos);
  pulled = pull(s, test_run, names{"w"}, int32_t{0});
  BOOST_TEST(pulled->values[0][0] == -0.5f); // unchanged by the stale gradient
  BOOST_TEST(log->size() == 1u);
  // A push at or past last_step is refused: nothing runs after the end.
  auto past = push(s, test_run, int32_t{0}, int64_t{10}, uint64_t{0}, int32_t{0}, names{"w"},
                   std::vector<tensor>{tensor({2}, 1.0f)});
  BOOST_REQUIRE(!past);
  BOOST_TEST(is(past.error(), errc::training_stopped));
}

// Sync: a snapshot asked for the next version waits for the update that
// reaches it, and copies the state before the one after.
BOOST_AUTO_TEST_CASE(a_sync_snapshot_waits_for_its_update) {
  auto s = start(0.5, tensor({2}, 1.0f), 4); // restored at step 4
  auto waiting = self->request(s, caf::infinite, snapshot_atom::value, test_run, int64_t{5});
  sched.run();
  auto push_step = [&](int32_t worker, int64_t step) {
    return push(s, test_run, worker, step, uint64_t{0}, int32_t{0}, names{"w"},
                std::vector<tensor>{tensor({2}, 2.0f)});
  };
  BOOST_TEST(is(push_step(0, 3).error(), errc::stale_gradient)); // before the restored step
  BOOST_TEST(*push_step(0, 4) == 4);
  BOOST_TEST(*push_step(1, 4) == 5); // update 5 applied: the snapshot is taken now
  BOOST_TEST(*push_step(0, 5) == 5);
  BOOST_TEST(*push_step(1, 5) == 6);
  std::optional<snapshot_index> index;
  waiting.receive([&](snapshot_index& x) { index = std::move(x); },
                  [&](caf::error& e) { BOOST_FAIL(describe(e)); });
  BOOST_REQUIRE(index);
  BOOST_TEST(index->version == 5);
  auto w = ask<tensor>(s, fetch_atom::value, test_run, index->ticket, int32_t{0});
  BOOST_REQUIRE(w);
  BOOST_TEST((*w)[0] == 0.0f); // 1 - 0.5 * 2, one update; not the second
  BOOST_REQUIRE(log->size() == 2u);
  BOOST_TEST(log->at(0).step == 5);
}

BOOST_AUTO_TEST_CASE(shrinking_r_applies_a_step_a_lost_worker_blocked) {
  auto s = start(1.0, tensor({1}, 0.0f));
  BOOST_REQUIRE(push(s, test_run, int32_t{0}, int64_t{0}, uint64_t{0}, int32_t{0}, names{"w"},
                     std::vector<tensor>{tensor({1}, 1.0f)}));
  BOOST_TEST(log->empty());                        // waiting for a second worker that is gone
  self->send(s, replicas_atom::value, int32_t{1}); // from its chief: the fixture
  sched.run();
  BOOST_REQUIRE(log->size() == 1u);
  BOOST_TEST(log->at(0).step == 1);
}

BOOST_AUTO_TEST_SUITE_END()
