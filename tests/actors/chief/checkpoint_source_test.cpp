// Checkpoints over the network (actors/chief/checkpoint_source.hpp): what the
// chief's catalog offers and refuses, and what the evaluator's fetcher
// accepts, on real files.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include <caf/all.hpp>

#include "actors/chief/checkpoint_source.hpp"
#include "actors/chief/read_window.hpp"
#include "tensor/checkpoint/checkpoint.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A log directory with model.json and two complete checkpoints (a manifest
// each) and a torn one without.
struct source_log_dir {
  fs::path root = fs::temp_directory_path() / ("troupe-ckpt-source-" + std::to_string(::getpid()));
  source_log_dir() {
    fs::remove_all(root);
    write(root / "model.json", "{\"card\":1}");
    write(root / "secret.txt", "not a checkpoint file");
    for (int step : {100, 200}) {
      auto dir = root / ("ckpt-" + std::to_string(step));
      write(dir / "manifest.json", "{\"step\":" + std::to_string(step) + "}");
      write(dir / "ps-0.safetensors", std::string(3000, static_cast<char>('a' + step / 100)));
    }
    write(root / "ckpt-300" / "ps-0.safetensors", "torn");
  }
  ~source_log_dir() { fs::remove_all(root); }
};

// Reads through the catalog in chunks of `chunk` bytes, as the evaluator does.
checkpoint_fetcher::reader through(const checkpoint_catalog& catalog, int64_t step,
                                   uint64_t chunk) {
  return [&catalog, step, chunk](const std::string& name, uint64_t offset) {
    return catalog.read(step, name, offset, chunk);
  };
}

template <class F>
bool throws(F f) {
  try {
    f();
  } catch (const checkpoint_error&) {
    return true;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_source_tests)

BOOST_AUTO_TEST_CASE(the_catalog_lists_the_newest_complete_checkpoint_after_a_step) {
  source_log_dir logs;
  checkpoint_catalog catalog(logs.root.string());
  auto newest = catalog.newest_after(-1);
  BOOST_TEST(newest.step == 200); // ckpt-300 has no manifest
  std::vector<std::string> expected{"model.json", "ckpt-200/manifest.json",
                                    "ckpt-200/ps-0.safetensors"};
  BOOST_TEST(newest.files == expected, boost::test_tools::per_element());
  BOOST_TEST(newest.sizes[2] == 3000u);
  BOOST_TEST(catalog.newest_after(150).step == 200);
  BOOST_TEST(catalog.newest_after(200).step == -1);
  BOOST_TEST(catalog.newest_after(200).files.empty());
}

BOOST_AUTO_TEST_CASE(the_catalog_reads_only_files_of_a_listed_checkpoint) {
  source_log_dir logs;
  checkpoint_catalog catalog(logs.root.string());
  BOOST_TEST(catalog.read(200, "ckpt-200/ps-0.safetensors", 2990, 100) == std::string(10, 'c'));
  BOOST_TEST(catalog.read(200, "model.json", 0, 4).size() == 4u);
  BOOST_TEST(catalog.read(200, "model.json", 1000, 4).empty()); // past the end
  for (auto name :
       {"secret.txt", "../secret.txt", "ckpt-200/../secret.txt", "ckpt-100/manifest.json",
        "ckpt-200/", "ckpt-200/missing", "/etc/passwd", "ckpt-200/./manifest.json"})
    BOOST_CHECK_MESSAGE((throws([&] { catalog.read(200, name, 0, 100); })), name);
  BOOST_CHECK_THROW(catalog.read(-1, "model.json", 0, 100), checkpoint_error);
  BOOST_CHECK_THROW(catalog.read(300, "ckpt-300/ps-0.safetensors", 0, 100), checkpoint_error);
  // A chunk is never larger than the protocol's, whatever is asked.
  write(logs.root / "ckpt-200" / "big.bin", std::string(checkpoint_chunk_bytes + 10, 'x'));
  BOOST_TEST(catalog.read(200, "ckpt-200/big.bin", 0, uint64_t{1} << 40).size()
             == checkpoint_chunk_bytes);
}

BOOST_AUTO_TEST_CASE(the_fetcher_copies_a_checkpoint_and_keeps_only_the_newest) {
  source_log_dir logs;
  checkpoint_catalog catalog(logs.root.string());
  auto local = logs.root / "copies";
  checkpoint_fetcher fetcher(local.string(), 1 << 20);
  auto listing = catalog.newest_after(-1);
  auto copy = fetcher.fetch(listing, through(catalog, 200, 1000)); // three chunks for ps-0
  BOOST_TEST(slurp(fs::path(copy.checkpoint) / "ps-0.safetensors") == std::string(3000, 'c'));
  BOOST_TEST(slurp(copy.card) == "{\"card\":1}");
  BOOST_TEST(checkpoint_step_of(fs::path(copy.checkpoint).filename().string()) == 200);
  auto older = catalog.newest_after(-1);
  older.step = 100;
  older.files = {"model.json", "ckpt-100/manifest.json", "ckpt-100/ps-0.safetensors"};
  auto second = fetcher.fetch(older, through(catalog, 100, 1 << 20));
  BOOST_TEST(fs::exists(second.checkpoint));
  BOOST_TEST(!fs::exists(copy.checkpoint)); // the earlier copy is gone
}

BOOST_AUTO_TEST_CASE(the_fetcher_refuses_a_listing_it_cannot_trust) {
  source_log_dir logs;
  checkpoint_catalog catalog(logs.root.string());
  auto good = catalog.newest_after(-1);
  checkpoint_fetcher fetcher((logs.root / "copies").string(), 10000);
  auto read = through(catalog, 200, 1 << 20);
  auto bad = good;
  bad.files[1] = "../../outside";
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  bad = good;
  bad.sizes.pop_back();
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  bad = good;
  bad.sizes[2] = uint64_t{1} << 50; // announces far more than the bound: refused before writing
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  bad = good;
  bad.sizes[2] = 2000; // the file holds 3000
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  bad = good;
  bad.sizes[2] = 4000; // the file ends early
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  bad = good;
  bad.files.erase(bad.files.begin()); // no model.json
  bad.sizes.erase(bad.sizes.begin());
  BOOST_CHECK_THROW(fetcher.fetch(bad, read), checkpoint_error);
  BOOST_CHECK_NO_THROW(fetcher.fetch(good, read));
}

// Pieces count until their follower shows a later token: a follower that
// never shows one gets its window and no more, one that shows the last
// token frees everything before it, and all followers share one bound.
BOOST_AUTO_TEST_CASE(the_read_window_bounds_pieces_on_their_way) {
  read_window<int> window(2, 3);
  BOOST_TEST(window.admit(1, 0, 11));
  BOOST_TEST(window.admit(1, 0, 12));
  BOOST_TEST(!window.admit(1, 0, 13));  // two on the way: refused
  BOOST_TEST(!window.admit(1, 99, 13)); // a token it never got proves nothing
  BOOST_TEST(window.admit(1, 12, 13));  // 11 and 12 arrived
  BOOST_TEST(window.in_flight() == 1u);
  BOOST_TEST(window.admit(2, 0, 21));
  BOOST_TEST(window.admit(2, 0, 22));
  BOOST_TEST(!window.admit(3, 0, 31)); // three on the way in all
  window.forget(2);
  BOOST_TEST(window.admit(3, 0, 31));
  BOOST_TEST(window.in_flight() == 2u);
}

// The source's actor, asked for a thousand pieces at once as an attacker
// asks: before, it answered every one (a 1,024-read burst took the chief
// from 39 MB to 2.48 GB); now two are answered and the rest refused, and a
// follower that shows each piece's token reads a whole file.
BOOST_AUTO_TEST_CASE(a_burst_of_reads_is_answered_within_the_window) {
  source_log_dir logs;
  write(logs.root / "ckpt-200" / "big.bin", std::string(3 * checkpoint_chunk_bytes, 'x'));
  caf::actor_system_config cfg;
  register_protocol(cfg);
  caf::actor_system sys{cfg};
  auto source = spawn_checkpoint_source(sys, logs.root.string());
  caf::scoped_actor self{sys};
  self->request(source, caf::infinite, ckpt_list_atom::value, int64_t{-1})
    .receive([](checkpoint_listing& l) { BOOST_TEST(l.step == 200); },
             [](caf::error&) { BOOST_FAIL("no listing"); });
  constexpr int burst = 1000;
  for (int i = 0; i < burst; ++i)
    self->send(source, ckpt_read_atom::value, int64_t{200}, std::string("ckpt-200/big.bin"),
               uint64_t{0}, uint64_t{0});
  int answered = 0, refused = 0;
  uint64_t last = 0;
  for (int i = 0; i < burst; ++i)
    self->receive([&](checkpoint_chunk& piece) { ++answered, last = piece.token; },
                  [&](caf::error& err) {
                    ++refused;
                    BOOST_TEST(describe(err).find("show the token") != std::string::npos);
                  });
  BOOST_TEST(answered == 2);
  BOOST_TEST(refused == burst - 2);
  // Sequential reads, each showing the last token, go on without end.
  std::string copy;
  for (uint64_t offset = 0; offset < 3 * checkpoint_chunk_bytes;) {
    bool ok = false;
    self
      ->request(source, caf::infinite, ckpt_read_atom::value, int64_t{200},
                std::string("ckpt-200/big.bin"), offset, last)
      .receive(
        [&](checkpoint_chunk& piece) {
          ok = !piece.bytes.empty();
          offset += piece.bytes.size();
          last = piece.token;
        },
        [&](caf::error& err) { BOOST_FAIL(describe(err)); });
    BOOST_REQUIRE(ok);
  }
  // A stranger that never listed is refused.
  caf::scoped_actor stranger{sys};
  stranger
    ->request(source, caf::infinite, ckpt_read_atom::value, int64_t{200}, std::string("model.json"),
              uint64_t{0}, uint64_t{0})
    .receive(
      [](checkpoint_chunk&) { BOOST_FAIL("a stranger read a piece"); },
      [](caf::error& err) { BOOST_TEST(describe(err).find("listed") != std::string::npos); });
  self->send_exit(source, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
