// The compute handoff between a worker's thread and the Python thread: a
// step posted is taken and answered (or refused) once; closing wakes both
// sides, and neither waits past it.
#define BOOST_TEST_MODULE python_worker
#include <boost/test/unit_test.hpp>

#include <future>
#include <thread>

#include "python/native/compute_handoff.hpp"

using namespace troupe;
using namespace troupe::python;
using namespace std::chrono_literals;

namespace {

struct one_step {
  std::vector<tensor> params{tensor({2}, 1.0f)};
  batch examples;
  std::vector<tensor> grads{tensor({2})};
  one_step() { examples.labels = {0, 1, 1}; }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_posted_step_is_taken_computed_and_answered) {
  compute_handoff handoff;
  one_step s;
  auto worker = std::async(std::launch::async,
                           [&] { return handoff.compute(s.params, s.examples, s.grads); });
  auto taken = handoff.take(10s);
  BOOST_REQUIRE(taken);
  BOOST_TEST(taken->params->at(0).data()[0] == 1.0f);
  BOOST_TEST(taken->examples->size() == 3u);
  taken->grads->at(0).data()[1] = 0.5f;
  batch_stats stats;
  stats.loss = 0.25;
  stats.correct = 2;
  handoff.answer(stats);
  auto answered = worker.get();
  BOOST_TEST(answered.loss == 0.25);
  BOOST_TEST(answered.correct == 2u);
  BOOST_TEST(s.grads[0].data()[1] == 0.5f);
  BOOST_CHECK_THROW(handoff.answer(stats), std::logic_error); // answered once
  BOOST_TEST(!handoff.take(10ms));                            // nothing posted
  BOOST_TEST(!handoff.closed());
}

BOOST_AUTO_TEST_CASE(a_refused_step_fails_the_worker_with_the_reason) {
  compute_handoff handoff;
  one_step s;
  auto worker = std::async(std::launch::async,
                           [&] { return handoff.compute(s.params, s.examples, s.grads); });
  BOOST_REQUIRE(handoff.take(10s));
  handoff.refuse("the loss was not finite");
  try {
    worker.get();
    BOOST_FAIL("a refused step was answered");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()) == "the loss was not finite");
  }
}

BOOST_AUTO_TEST_CASE(closing_wakes_a_waiting_worker_and_a_waiting_taker) {
  compute_handoff handoff;
  one_step s;
  auto taker = std::async(std::launch::async, [&] { return handoff.take(60s).has_value(); });
  std::this_thread::sleep_for(20ms);
  handoff.close("the run is over");
  BOOST_TEST(!taker.get());
  BOOST_TEST(handoff.closed());
  // A worker posting after the close is told at once, with the reason.
  BOOST_CHECK_EXCEPTION(
    handoff.compute(s.params, s.examples, s.grads), std::runtime_error,
    [](const std::runtime_error& e) { return std::string(e.what()) == "the run is over"; });

  compute_handoff second;
  auto worker = std::async(std::launch::async,
                           [&] { return second.compute(s.params, s.examples, s.grads); });
  BOOST_REQUIRE(second.take(10s)); // taken, never answered: the Python side gave up
  second.close("the Python code raised");
  BOOST_CHECK_THROW(worker.get(), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_table_model_hands_over_its_rows_and_keeps_its_keys) {
  auto handoff = std::make_shared<compute_handoff>();
  model_options options;
  options.keys = {0, 2, 1}; // two categorical fields, a click or not
  options.classes = 2;
  auto inner = std::shared_ptr<model>(make_model(model_kind::fm, options));
  handed_off_model net(inner, handoff);
  BOOST_TEST(net.tables().size() == 1u);
  BOOST_TEST(net.tables()[0].dim == inner->tables()[0].dim);
  batch b;
  b.images = tensor({1, 8});
  pack_key(7, 1.0f, b.images.data());
  pack_key(9, 1.0f, b.images.data() + 4);
  b.labels = {1};
  std::vector<int64_t> ids, expected;
  net.batch_keys(b, ids);
  inner->batch_keys(b, expected);
  BOOST_TEST(ids == expected); // the inner model's keys
  batch_rows rows;
  rows.keys.assign(ids.data(), ids.size());
  rows.values.assign(ids.size() * net.tables()[0].dim, 0.5f);
  auto params = initial_values(*inner, 1);
  std::vector<tensor> grads;
  auto worker = std::async(std::launch::async,
                           [&] { return net.train_step_rows(params, b, rows, grads); });
  auto step = handoff->take(10s);
  BOOST_REQUIRE(step);
  BOOST_REQUIRE(step->rows && step->rows->size() == 1u);
  auto& handed = *(*step->rows)[0];
  BOOST_TEST(handed.keys.size() == 2u);
  BOOST_TEST(handed.grads.size() == 2u * net.tables()[0].dim); // sized for the Python side
  handed.grads[0] = 3;
  handoff->answer({0.25, 1, 1});
  BOOST_TEST(worker.get().loss == 0.25);
  BOOST_TEST(rows.grads[0] == 3.0f);
}
