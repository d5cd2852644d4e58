// The chief's checkpoint save as a state machine (actors/chief/
// checkpoint_save.hpp), every path without an actor: the fence, the
// copies, the write, failures, and the final save beside a periodic one.
#include <boost/test/unit_test.hpp>

#include "actors/chief/checkpoint_save.hpp"

using namespace troupe;

namespace {

checkpoint_save::context async_at(int64_t step, bool training = true) {
  return {step, training, false, 1000};
}

checkpoint_save::context sync_at(int64_t step) {
  return {step, true, true, 1000};
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_save_tests)

BOOST_AUTO_TEST_CASE(an_async_save_fences_copies_resumes_writes_and_commits) {
  checkpoint_save save;
  auto act = save.begin_periodic(async_at(100));
  BOOST_TEST(act.began.value_or(-1) == 100);
  BOOST_TEST(act.hold_grants);
  BOOST_TEST(!act.request_copies); // not before every granted step is in
  act = save.fence_reached(103);
  BOOST_TEST(act.request_copies.value_or(-1) == 103);
  auto id = save.id();
  BOOST_TEST(!save.copy_arrived(id, 2).write); // one of two shards
  act = save.copy_arrived(id, 2);
  BOOST_TEST(act.resume_grants);
  BOOST_TEST(act.write.value_or(-1) == 103);
  BOOST_TEST(save.saving()); // until the writer reports
  act = save.written(async_at(110), 103, true, "logs/ckpt-103");
  BOOST_TEST(!save.saving());
  BOOST_TEST(save.last_saved_step() == 103);
  BOOST_TEST(!act.final_over);
}

BOOST_AUTO_TEST_CASE(a_sync_save_copies_after_the_update_after_next_without_a_fence) {
  checkpoint_save save;
  auto act = save.begin_periodic(sync_at(40));
  BOOST_TEST(!act.hold_grants);
  BOOST_TEST(act.request_copies.value_or(-1) == 42);
  BOOST_TEST(save.copy_arrived(save.id(), 1).write.value_or(-1) == 42);
}

BOOST_AUTO_TEST_CASE(near_the_last_step_sync_leaves_the_state_to_the_final_save) {
  checkpoint_save save;
  auto act = save.begin_periodic(sync_at(999));
  BOOST_TEST(!act.request_copies);
  BOOST_TEST(!save.saving());
  act = save.want_final(sync_at(999));
  BOOST_TEST(act.final_over); // nothing to copy from here: the end saves at last_step
}

BOOST_AUTO_TEST_CASE(no_second_periodic_save_while_one_runs_and_none_outside_training) {
  checkpoint_save save;
  save.begin_periodic(async_at(10));
  BOOST_TEST(!save.begin_periodic(async_at(20)).began);
  checkpoint_save idle;
  BOOST_TEST(!idle.begin_periodic(async_at(20, false)).began);
}

BOOST_AUTO_TEST_CASE(a_failed_copy_abandons_the_save_and_training_goes_on) {
  checkpoint_save save;
  save.begin_periodic(async_at(100));
  save.fence_reached(100);
  auto act = save.copy_failed(save.id(), "ps:1: request_timeout");
  BOOST_TEST(act.abandoned == "checkpoint at step 100 abandoned: ps:1: request_timeout");
  BOOST_TEST(act.resume_grants);
  BOOST_TEST(!act.final_over);
  BOOST_TEST(!save.saving());
  BOOST_TEST(save.last_saved_step() == -1);
}

BOOST_AUTO_TEST_CASE(replies_of_an_earlier_attempt_change_nothing) {
  checkpoint_save save;
  save.begin_periodic(async_at(100));
  save.fence_reached(100);
  auto old_id = save.id();
  save.drop(); // a lost shard
  save.begin_periodic(async_at(100));
  save.fence_reached(100);
  BOOST_TEST(!save.copy_arrived(old_id, 1).write);
  BOOST_TEST(save.copy_failed(old_id, "late").abandoned.empty());
  BOOST_TEST(save.saving());
  BOOST_TEST(!save.written(async_at(120), 99, true, "elsewhere").final_over); // another step
  BOOST_TEST(save.saving());
}

BOOST_AUTO_TEST_CASE(the_final_save_after_training_copies_at_once_and_ends_the_run) {
  checkpoint_save save;
  auto act = save.want_final(async_at(1000, false));
  BOOST_TEST(!act.hold_grants); // every step is in
  BOOST_TEST(act.request_copies.value_or(-1) == 1000);
  act = save.copy_arrived(save.id(), 1);
  BOOST_TEST(!act.resume_grants); // a final save's stop follows
  BOOST_TEST(act.write.value_or(-1) == 1000);
  act = save.written(async_at(1000, false), 1000, true, "ckpt-1000");
  BOOST_TEST(act.final_over);
  BOOST_TEST(save.final_error().empty());
}

BOOST_AUTO_TEST_CASE(no_final_save_when_the_latest_checkpoint_holds_the_last_step) {
  checkpoint_save save{1000};
  auto act = save.want_final(async_at(1000, false));
  BOOST_TEST(act.final_over);
  BOOST_TEST(!act.began);
}

BOOST_AUTO_TEST_CASE(a_failed_final_write_is_reported_with_its_error) {
  checkpoint_save save;
  save.want_final(async_at(1000, false));
  save.copy_arrived(save.id(), 1);
  auto act = save.written(async_at(1000, false), 1000, false, "disk full");
  BOOST_TEST(act.final_over);
  BOOST_TEST(save.final_error() == "disk full");
  checkpoint_save copy_lost;
  copy_lost.want_final(async_at(1000, false));
  act = copy_lost.copy_failed(copy_lost.id(), "ps:0 gone");
  BOOST_TEST(act.final_over);
  BOOST_TEST(copy_lost.final_error() == "ps:0 gone");
}

BOOST_AUTO_TEST_CASE(the_end_takes_over_a_fence_not_yet_reached) {
  checkpoint_save save;
  save.begin_periodic(async_at(100));
  auto periodic = save.id();
  auto act = save.want_final(async_at(102)); // SIGTERM during the fence
  BOOST_TEST(save.id() != periodic);
  BOOST_TEST(save.final());
  BOOST_TEST(act.hold_grants); // a fence of its own
  BOOST_TEST(save.fence_reached(104).request_copies.value_or(-1) == 104);
}

BOOST_AUTO_TEST_CASE(copies_of_the_final_state_under_way_become_the_final_save) {
  checkpoint_save save;
  save.begin_periodic(async_at(1000));
  save.fence_reached(1000);
  auto act = save.want_final(async_at(1000, false));
  BOOST_TEST(!act.began); // no second save: this one holds the final state
  BOOST_TEST(save.final());
  save.copy_arrived(save.id(), 1);
  BOOST_TEST(save.written(async_at(1000, false), 1000, true, "ckpt-1000").final_over);
}

BOOST_AUTO_TEST_CASE(a_final_save_waits_for_the_copies_under_way_then_begins) {
  checkpoint_save save;
  save.begin_periodic(async_at(900));
  save.fence_reached(900);
  auto act = save.want_final(async_at(1000, false));
  BOOST_TEST(!act.began);
  BOOST_TEST(!save.final());
  save.copy_arrived(save.id(), 1);
  act = save.written(async_at(1000, false), 900, true, "ckpt-900");
  BOOST_TEST(!act.final_over);
  BOOST_TEST(act.began.value_or(-1) == 1000); // the final one, now
  BOOST_TEST(act.request_copies.value_or(-1) == 1000);
  BOOST_TEST(save.last_saved_step() == 900);
  save.copy_arrived(save.id(), 1);
  BOOST_TEST(save.written(async_at(1000, false), 1000, true, "ckpt-1000").final_over);
  BOOST_TEST(save.last_saved_step() == 1000);
}

BOOST_AUTO_TEST_SUITE_END()
