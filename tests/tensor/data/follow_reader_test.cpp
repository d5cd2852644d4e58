// A followed directory (tensor/data/follow_reader.hpp): files read as they
// arrive, in the order of their numbers, shared among workers without
// overlap or loss, and continued from a saved position without reading an
// event twice or skipping one; files still being written are left alone.
#include <filesystem>
#include <set>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "tensor/data/follow_reader.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// libsvm lines whose one key is the event's id.
void write_events(const temp_dir& d, const std::string& name, int64_t first, int64_t count) {
  std::string text;
  for (int64_t id = first; id < first + count; ++id)
    text += std::to_string(id % 2) + " " + std::to_string(id) + ":1\n";
  write_text(d.file("stream/" + name + ".tmp"), text);
  std::filesystem::rename(d.file("stream/" + name + ".tmp"), d.file("stream/" + name));
}

std::shared_ptr<const data_split> followed(const temp_dir& d) {
  std::filesystem::create_directories(d.file("stream"));
  write_text(d.file("test.svm"), "0 1:1\n1 2:1\n");
  data_options o;
  o.train = {d.file("stream")};
  o.test = {d.file("test.svm")};
  o.format = "libsvm";
  o.follow = true;
  return catalog_data(o, "").train;
}

stream_options reading(size_t worker, size_t workers, size_t batch) {
  stream_options o;
  o.index = worker;
  o.count = workers;
  o.batch_size = batch;
  o.prefetch = 2;
  return o;
}

// The events of a batch.
std::vector<int64_t> ids_of(const batch& b, const data_split& split) {
  std::vector<int64_t> out;
  auto width = split.features();
  for (size_t e = 0; e < b.size(); ++e)
    out.push_back(unpack_key(b.images.data() + static_cast<int64_t>(e) * width + split.keys.dense));
  return out;
}

// Takes `n` batches (a batch not ready within 5 s fails the test).
void take(example_stream& s, const data_split& split, size_t n, std::vector<int64_t>& seen) {
  batch b;
  for (size_t i = 0; i < n; ++i) {
    for (int wait = 0; !s.ready() && wait < 500; ++wait)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_REQUIRE(s.ready());
    s.next_batch(b);
    auto ids = ids_of(b, split);
    seen.insert(seen.end(), ids.begin(), ids.end());
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(follow_reader_tests)

BOOST_AUTO_TEST_CASE(a_files_number_is_the_number_its_digits_make) {
  BOOST_TEST(*sequence_number("part-000123.tsv") == 123u);
  BOOST_TEST(*sequence_number("20261207-1005.tsv") == 202612071005u);
  BOOST_TEST(!sequence_number("part-7.tsv.tmp"));
  BOOST_TEST(!sequence_number(".part-7.tsv"));
  BOOST_TEST(!sequence_number("part-7.inprogress"));
  BOOST_TEST(!sequence_number("events.tsv"));
  BOOST_TEST(!sequence_number("1234567890123456789.tsv")); // 19 digits
  std::set<size_t> shares;
  for (uint64_t n = 0; n < 64; ++n)
    shares.insert(share_of_file(n * 1000, 2)); // even numbers still reach both shares
  BOOST_TEST(shares.size() == 2u);
}

// Two workers read 20 files of 30 events as they come, in batches of 8;
// each takes what it can, then saves its position and a new reader goes on
// from it: every event is read exactly once but for the last partial
// batches, and each worker reads its files in order.
BOOST_AUTO_TEST_CASE(workers_share_a_stream_without_overlap_or_loss_across_a_restart) {
  temp_dir d;
  auto split = followed(d);
  for (int64_t f = 0; f < 10; ++f)
    write_events(d, "part-" + std::to_string(f) + ".svm", f * 30, 30);
  write_text(d.file("stream/part-99.svm.tmp"), "1 999999:1\n"); // not complete: never read
  std::vector<int64_t> seen[2];
  stream_position saved[2];
  size_t taken[2] = {0, 0};
  for (size_t w = 0; w < 2; ++w) {
    example_stream s(split, reading(w, 2, 8));
    BOOST_TEST(s.follows());
    // What its files hold now, in whole batches, less one to leave some read ahead.
    size_t mine = 0;
    for (uint64_t f = 0; f < 10; ++f)
      mine += share_of_file(f, 2) == w ? 30 : 0;
    taken[w] = mine / 8 - 1;
    take(s, *split, taken[w], seen[w]);
    saved[w] = s.position();
  }
  for (int64_t f = 10; f < 20; ++f)
    write_events(d, "part-" + std::to_string(f) + ".svm", f * 30, 30);
  size_t total_mine[2] = {0, 0};
  for (uint64_t f = 0; f < 20; ++f)
    total_mine[share_of_file(f, 2)] += 30;
  for (size_t w = 0; w < 2; ++w) {
    example_stream s(split, reading(w, 2, 8));
    s.seek(saved[w]);
    take(s, *split, total_mine[w] / 8 - taken[w], seen[w]);
    BOOST_TEST(std::is_sorted(seen[w].begin(), seen[w].end())); // files in order, lines in order
  }
  std::set<int64_t> all;
  for (auto& ids : seen)
    for (auto id : ids)
      BOOST_TEST(all.insert(id).second); // no event twice
  // Every event but each worker's last partial batch.
  BOOST_TEST(all.size() == 600u - total_mine[0] % 8 - total_mine[1] % 8);
  BOOST_TEST(all.count(999999) == 0u);
}

// Progressive validation scores the newest file no worker has begun.
BOOST_AUTO_TEST_CASE(the_next_unread_file_is_the_newest_no_worker_has_begun) {
  temp_dir d;
  followed(d);
  BOOST_TEST(!next_unread_file(d.file("stream"), {0, 0}));
  for (int64_t f = 0; f < 6; ++f)
    write_events(d, "part-" + std::to_string(f) + ".svm", f * 10, 10);
  write_text(d.file("stream/part-9.svm.tmp"), "1 5:1\n"); // not complete
  auto newest = next_unread_file(d.file("stream"), {0, 0});
  BOOST_REQUIRE(newest);
  BOOST_TEST(*newest == d.file("stream/part-5.svm"));
  // Its worker is reading file 5: the newest unread is an older one of the other's.
  std::vector<uint64_t> reading(2, 0);
  reading[share_of_file(5, 2)] = 5;
  auto other = next_unread_file(d.file("stream"), reading);
  BOOST_REQUIRE(other);
  BOOST_TEST(*other != d.file("stream/part-5.svm"));
  // Both caught up: nothing unseen.
  BOOST_TEST(!next_unread_file(d.file("stream"), {5, 5}));
}

// A stream stopped while its reader waits for files ends at once.
BOOST_AUTO_TEST_CASE(a_reader_waiting_for_files_stops_at_once) {
  temp_dir d;
  auto split = followed(d);
  auto begun = std::chrono::steady_clock::now();
  {
    example_stream s(split, reading(0, 1, 8));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    BOOST_TEST(!s.ready());
  }
  BOOST_TEST((std::chrono::steady_clock::now() - begun < std::chrono::seconds(2)));
}

BOOST_AUTO_TEST_CASE(a_follow_setting_that_cannot_work_is_refused_by_name) {
  temp_dir d;
  data_options o;
  o.train = {d.file("nowhere")};
  o.test = {d.file("t.svm")};
  o.format = "libsvm";
  o.follow = true;
  write_text(d.file("t.svm"), "0 1:1\n");
  BOOST_TEST(contains(message_of<data_error>([&] { catalog_data(o, ""); }), "is not a directory"));
  o.format = "csv";
  BOOST_TEST(contains(message_of<data_error>([&] { catalog_data(o, ""); }),
                      "set data.format = \"criteo\" or \"libsvm\""));
}

BOOST_AUTO_TEST_SUITE_END()
