#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include <boost/test/unit_test.hpp>

#include "tensor/data/stream.hpp"
#include "tests/support/data_files.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// `files` CSV files of `rows` rows each; feature 0 is the example's global
// id, so a batch says which examples it holds.
std::shared_ptr<const data_split> id_files(const temp_dir& d, size_t files, size_t rows,
                                           size_t bad_every = 0) {
  data_options o;
  o.normalize = normalization::none; // the ids as written
  size_t id = 0;
  for (size_t f = 0; f < files; ++f) {
    std::string text = "id,noise,label\n";
    for (size_t r = 0; r < rows; ++r, ++id) {
      if (bad_every && id % bad_every == bad_every - 1)
        text += std::to_string(id) + ",oops," + std::to_string(id % 3) + "\n";
      else
        text += std::to_string(id) + ",0.5," + std::to_string(id % 3) + "\n";
    }
    auto name = "part-" + std::to_string(f) + ".csv";
    write_text(d.file(name), text);
    o.train.push_back(d.file(name));
  }
  o.test = {o.train.front()};
  o.classes = 3;
  if (bad_every)
    o.bad_records = bad_record_policy::skip;
  return catalog_data(o, "").train;
}

std::vector<int> ids_of(const batch& b) {
  std::vector<int> out;
  for (size_t i = 0; i < b.size(); ++i)
    out.push_back(static_cast<int>(b.images[i * 2]));
  return out;
}

// The stream of worker `index` of `count`, `batch_size` examples a batch.
stream_options share_options(size_t index, size_t count, size_t batch_size = 100) {
  stream_options o;
  o.index = index;
  o.count = count;
  o.batch_size = batch_size;
  return o;
}

// The ids worker `index` of `count` reads in its first epoch.
std::multiset<int> first_epoch(std::shared_ptr<const data_split> split, size_t index, size_t count,
                               size_t buffer = 4) {
  auto o = share_options(index, count, 1);
  o.shuffle_buffer = buffer;
  o.prefetch = 2;
  example_stream s(split, o);
  std::multiset<int> out;
  batch b;
  while (out.size() < s.share_size()) {
    s.next_batch(b);
    BOOST_REQUIRE(s.position().epoch == 0u);
    out.insert(ids_of(b)[0]);
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(streams)

BOOST_AUTO_TEST_CASE(shares_go_by_file_and_cover_every_example_exactly_once) {
  temp_dir d;
  auto split = id_files(d, 5, 7); // ids 0..34
  for (size_t workers : {1u, 2u, 3u, 5u, 6u, 8u}) {
    std::multiset<int> all;
    for (size_t w = 0; w < workers; ++w) {
      auto share = share_of(*split, w, workers);
      if (workers <= 5) // by file: worker w reads files w, w + workers, ...
        for (auto& s : share) {
          BOOST_TEST(s.file % workers == w);
          BOOST_TEST(s.first == 0u);
        }
      auto ids = first_epoch(split, w, workers);
      all.insert(ids.begin(), ids.end());
    }
    BOOST_TEST(all.size() == 35u, workers << " workers");
    BOOST_TEST(std::set<int>(all.begin(), all.end()).size() == 35u, workers << " workers");
  }
  BOOST_TEST(contains(error_of([&] { share_of(*split, 0, 40); }), "gets no examples"));
}

BOOST_AUTO_TEST_CASE(skipped_records_leave_the_union_without_duplicates) {
  temp_dir d;
  auto split = id_files(d, 2, 10, 4); // ids 3, 7, 11, ... are bad
  std::multiset<int> all;
  for (size_t w = 0; w < 3; ++w) {
    auto o = share_options(w, 3, 1);
    o.shuffle = false;
    example_stream s(split, o);
    batch b;
    // The first example of epoch 1 ends the loop; it is not counted.
    std::vector<int> ids;
    for (;;) {
      s.next_batch(b);
      if (s.position().epoch != 0)
        break;
      ids.push_back(ids_of(b)[0]);
    }
    all.insert(ids.begin(), ids.end());
  }
  std::set<int> want;
  for (int i = 0; i < 20; ++i)
    if (i % 4 != 3)
      want.insert(i);
  BOOST_TEST(all.size() == want.size());
  BOOST_TEST((std::set<int>(all.begin(), all.end()) == want));
}

BOOST_AUTO_TEST_CASE(the_order_follows_the_seed_and_changes_each_epoch) {
  temp_dir d;
  auto split = id_files(d, 3, 20);
  auto run = [&](uint64_t seed, size_t prefetch) {
    stream_options o;
    o.seed = seed;
    o.batch_size = 6;
    o.shuffle_buffer = 8;
    o.prefetch = prefetch;
    example_stream s(split, o);
    std::vector<int> ids;
    batch b;
    for (int i = 0; i < 20; ++i) { // two epochs
      s.next_batch(b);
      auto got = ids_of(b);
      ids.insert(ids.end(), got.begin(), got.end());
    }
    return ids;
  };
  auto a = run(7, 3);
  BOOST_TEST((a == run(7, 0))); // prefetching changes nothing
  BOOST_TEST((a == run(7, 1)));
  BOOST_TEST(!(a == run(8, 3))); // another seed, another order
  std::vector<int> first(a.begin(), a.begin() + 60), second(a.begin() + 60, a.end());
  BOOST_TEST(!(first == second));
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  BOOST_TEST((first == second)); // each epoch is the whole share once
  BOOST_TEST(first.front() == 0);
  BOOST_TEST(first.back() == 59);
  // A buffer of 8 moves an example at most so far ahead of its file order.
  std::vector<int> unshuffled_within(a.begin(), a.begin() + 60);
  bool moved = false;
  for (size_t i = 0; i < 60; ++i)
    moved = moved || unshuffled_within[i] != static_cast<int>(i);
  BOOST_TEST(moved);
}

BOOST_AUTO_TEST_CASE(a_restored_stream_continues_where_the_position_says) {
  temp_dir d;
  auto split = id_files(d, 4, 9);
  auto o = share_options(1, 2, 4);
  o.shuffle_buffer = 5;
  example_stream original(split, o);
  batch b;
  for (int i = 0; i < 7; ++i) // into the second epoch (18 examples per epoch)
    original.next_batch(b);
  auto at = original.position();
  BOOST_TEST(at.epoch == 1u);
  BOOST_TEST(at.offset == 10u);
  example_stream restored(split, o);
  restored.seek(at);
  for (int i = 0; i < 10; ++i) {
    batch want, got;
    original.next_batch(want);
    restored.next_batch(got);
    BOOST_TEST((ids_of(want) == ids_of(got)));
  }
  BOOST_TEST(contains(error_of([&] {
                        restored.seek({0, 19, {}});
                      }),
                      "lies beyond its share of 18"));
}

// Issue 29 (elastic membership): a new share takes effect where the next
// epoch begins, never within one, whether the shares are kept in memory
// or streamed, and the position names the share its offset counts in.
BOOST_AUTO_TEST_CASE(a_new_share_takes_effect_where_the_next_epoch_begins) {
  temp_dir d;
  auto split = id_files(d, 1, 40); // one file: shares are ranges of ids 0..39
  auto ids_in = [](size_t first, size_t end) {
    std::multiset<int> out;
    for (auto i = first; i < end; ++i)
      out.insert(static_cast<int>(i));
    return out;
  };
  // 15 examples of buffer: 20 (0 of 2) streamed, 10 (0 of 4) kept, 40 streamed.
  for (size_t buffer : {size_t{15}, size_t{0}}) {
    BOOST_TEST_CONTEXT("shuffle buffer " << buffer) {
      auto o = share_options(0, 2, 1);
      o.shuffle_buffer = buffer;
      o.prefetch = 3;
      example_stream s(split, o);
      BOOST_TEST((s.position().share == data_share{0, 2}));
      batch b;
      // Reads epoch `epoch` (in `share`) to its end; `next` is set well
      // inside it, once the reader (3 batches ahead) is in it too.
      auto read_epoch = [&](uint64_t epoch, data_share share, data_share next) {
        std::multiset<int> got;
        for (;;) {
          s.next_batch(b);
          BOOST_REQUIRE(s.position().epoch == epoch);
          BOOST_TEST((s.position().share == share));
          got.insert(ids_of(b)[0]);
          if (s.position().offset == 5 && next.count != 0)
            s.set_next_share(next);
          if (s.position().offset == 40 / share.count)
            return got;
        }
      };
      BOOST_TEST((read_epoch(0, {0, 2}, {0, 4}).size() == 20u));
      BOOST_TEST((read_epoch(1, {0, 4}, {3, 4}) == ids_in(0, 10)));
      BOOST_TEST((read_epoch(2, {3, 4}, {0, 1}) == ids_in(30, 40)));
      BOOST_TEST((read_epoch(3, {0, 1}, {}) == ids_in(0, 40)));
      BOOST_TEST((read_epoch(4, {0, 1}, {}) == ids_in(0, 40)));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_position_in_another_share_restores_that_share) {
  temp_dir d;
  auto split = id_files(d, 1, 30);
  auto o = share_options(0, 2, 1);
  o.shuffle_buffer = 4;
  example_stream original(split, o);
  original.set_next_share({2, 3}); // ids 20..29 from epoch 1 on
  batch b;
  for (int i = 0; i < 15 + 4; ++i)
    original.next_batch(b);
  auto at = original.position();
  BOOST_TEST(at.epoch == 1u);
  BOOST_TEST(at.offset == 4u);
  BOOST_TEST((at.share == data_share{2, 3}));
  example_stream restored(split, o); // starts as 0 of 2
  restored.seek(at);
  BOOST_TEST(restored.share_size() == 10u);
  for (int i = 0; i < 12; ++i) { // across into epoch 2, still 2 of 3
    batch want, got;
    original.next_batch(want);
    restored.next_batch(got);
    BOOST_TEST((ids_of(want) == ids_of(got)));
    BOOST_TEST(ids_of(got)[0] >= 20);
  }
  BOOST_TEST(contains(error_of([&] { restored.set_next_share({0, 41}); }), "gets no examples"));
}

// Issue 25: a share that fits the buffer (the default picks the whole share
// up to 256 MiB) is read once and kept: each epoch a uniform permutation of
// it, the files never read again, and a restore lands where the run was.
BOOST_AUTO_TEST_CASE(a_share_that_fits_is_kept_and_permuted_each_epoch) {
  temp_dir d;
  auto split = id_files(d, 2, 30); // ids 0..59
  auto make = [&](uint64_t seed, size_t prefetch) {
    auto o = share_options(1, 2, 5);
    o.seed = seed;
    o.prefetch = prefetch;
    return std::make_unique<example_stream>(split, o);
  };
  auto read_epochs = [&](example_stream& s, int epochs) {
    std::vector<std::vector<int>> out(static_cast<size_t>(epochs));
    batch b;
    for (int i = 0; i < epochs * 6; ++i) { // 30 examples a share, 5 a batch
      s.next_batch(b);
      auto got = ids_of(b);
      auto& epoch = out[static_cast<size_t>(i / 6)];
      epoch.insert(epoch.end(), got.begin(), got.end());
    }
    return out;
  };
  share_reader probe(split, share_options(1, 2));
  BOOST_TEST(probe.resident());
  BOOST_TEST(probe.buffer_examples() == 30u);
  auto s = make(7, 2);
  batch b;
  s->next_batch(b); // the share is in memory from here on
  std::vector<int> all = ids_of(b);
  for (auto& f : split->files)
    std::remove(f.features.c_str());
  for (int i = 1; i < 18; ++i) { // three epochs of 30 in batches of 5
    s->next_batch(b);
    auto got = ids_of(b);
    all.insert(all.end(), got.begin(), got.end());
  }
  std::vector<std::vector<int>> epochs;
  for (size_t e = 0; e < 3; ++e)
    epochs.emplace_back(all.begin() + 30 * e, all.begin() + 30 * (e + 1));
  std::vector<int> share(30);
  std::iota(share.begin(), share.end(), 30); // worker 1 of 2 holds file 1: ids 30..59
  for (size_t e = 0; e < 3; ++e) {
    auto sorted = epochs[e];
    std::sort(sorted.begin(), sorted.end());
    BOOST_TEST((sorted == share), "epoch " << e << " is the whole share once");
  }
  BOOST_TEST(!(epochs[1] == epochs[2])); // another permutation each epoch
  // The same seed gives the same order, prefetching or not; a restore too.
  id_files(d, 2, 30); // the files again, for new streams
  auto again = make(7, 0);
  auto replay = read_epochs(*again, 2);
  auto original = make(7, 3);
  auto reference = read_epochs(*original, 2);
  BOOST_TEST((replay == reference));
  BOOST_TEST(!(read_epochs(*make(8, 3), 1)[0] == reference[0]));
  auto restored = make(7, 2);
  restored->seek({1, 10, {}});
  auto tail = read_epochs(*restored, 1)[0]; // epoch 1 from 10, then epoch 2's first 10
  BOOST_TEST((std::vector<int>(tail.begin(), tail.begin() + 20)
              == std::vector<int>(reference[1].begin() + 10, reference[1].end())));
  BOOST_TEST(contains(error_of([&] {
                        restored->seek({0, 31, {}});
                      }),
                      "lies beyond its share of 30"));
}

// The automatic buffer keeps a share only up to 256 MiB: a larger one is
// streamed through 10000 examples, as before.
BOOST_AUTO_TEST_CASE(a_share_too_large_to_keep_is_streamed) {
  temp_dir d;
  auto split = std::make_shared<data_split>(*id_files(d, 1, 10));
  split->files[0].records = 200'000'000; // as the catalog would count a huge file
  stream_options o;
  share_reader reader(split, o);
  BOOST_TEST(!reader.resident());
  BOOST_TEST(reader.buffer_examples() == auto_shuffle_examples);
  o.shuffle_buffer = 50;
  BOOST_TEST(!share_reader(split, o).resident());
}

BOOST_AUTO_TEST_CASE(a_bad_record_on_the_reader_thread_reaches_the_caller) {
  temp_dir d;
  auto split = std::make_shared<data_split>(*id_files(d, 1, 10));
  // The file changes after the catalog checked it.
  write_text(split->files[0].features, "id,noise,label\n1,0.5,0\n2,bad,1\n");
  split->files[0].records = 2;
  stream_options o;
  o.batch_size = 2;
  o.shuffle = false;
  example_stream s(split, o);
  batch b;
  BOOST_TEST(contains(error_of([&] { s.next_batch(b); }), "line 3, column 'noise' (1)"));
}

// Memory follows the shuffle buffer and the prefetched batches, not the
// data: a 24 MiB file is streamed with a few MiB.
BOOST_AUTO_TEST_CASE(memory_stays_bounded_by_the_buffers) {
  temp_dir d;
  data_options opts;
  {
    std::ofstream f(d.file("big.csv"));
    f << "a,b,c,d,e,f,g,h,label\n";
    for (int r = 0; r < 400000; ++r)
      f << r << ",0.25,0.5,0.75,1,1.25,1.5,1.75," << r % 10 << "\n";
  }
  opts.train = {d.file("big.csv")};
  opts.test = opts.train;
  auto split = catalog_data(opts, "").train;
  reset_peak_resident();
  auto before = peak_resident_mib();
  stream_options o;
  o.batch_size = 100;
  o.shuffle_buffer = 1000;
  o.prefetch = 4;
  example_stream s(split, o);
  batch b;
  for (int i = 0; i < 4100; ++i) // a whole epoch and then some
    s.next_batch(b);
  BOOST_TEST(s.position().epoch == 1u);
  // 400000 examples x 8 floats = 12 MiB as floats; the stream holds ~40 KiB
  // of buffer, 4 x 3 KiB of batches and zlib's buffers.
  BOOST_TEST(peak_resident_mib() - before < 6.0);
}

BOOST_AUTO_TEST_SUITE_END()
