// Checkpoints on disk (tensor/checkpoint/checkpoint.hpp): round trip,
// corruption, truncation, keep-N, a torn save, and reassembly onto another
// partitioning.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <unistd.h>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json.hpp"
#include "tensor/checkpoint/restore.hpp"
#include "tensor/plan/partitioner.hpp"
#include "tests/support/errors.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

tensor counting(shape_t shape, float start) {
  tensor t(std::move(shape));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = start + static_cast<float>(i);
  return t;
}

struct log_dir {
  std::string root = (fs::temp_directory_path()
                      / ("troupe-ckpt-test-" + std::to_string(::getpid()) + "-"
                         + std::to_string(counter++)))
                       .string();
  static inline int counter = 0;
  ~log_dir() { fs::remove_all(root); }
};

// fc1/weights [6, 4] split in two along axis 0 (rows 0..2 on ps:0, 3..5 on
// ps:1), fc1/biases [4] whole on ps:0, and an Adam slot of each slice.
struct saved_model {
  tensor weights = counting({6, 4}, 0.0f);
  tensor weights_adam = counting({6, 4}, 100.0f);
  tensor biases = counting({4}, 1000.0f);
  tensor biases_adam = counting({4}, 2000.0f);

  variable_slice part(int i) const {
    return split_variable(variable_spec{"fc1/weights", {6, 4}, {}}, 2, 0)
      .at(static_cast<size_t>(i));
  }

  std::string save(const checkpoint_dir& dir, int64_t step, int keep = 5) const {
    auto staging = dir.begin(step);
    checkpoint_manifest m;
    m.step = step;
    m.fingerprint = {{"model", "test"}, {"optimizer", "adam"}};
    m.variables = {{"fc1/weights", {6, 4}}, {"fc1/biases", {4}}};
    m.shard_updates = {step, step};
    m.data = {{0, 1, 17, 0, 0}, {3, 2, 5, 1, 3}}; // worker:3 read share 1 of 3 (elastic)
    auto p0 = part(0), p1 = part(1);
    struct item {
      std::string key, variable, slot;
      int64_t offset;
      tensor value;
      int shard;
    };
    std::vector<item> items{
      {p0.name, "fc1/weights", "", p0.offset, extract_slice(p0, weights), 0},
      {p0.name + "/Adam", "fc1/weights", "Adam", p0.offset, extract_slice(p0, weights_adam), 0},
      {"fc1/biases", "fc1/biases", "", 0, biases, 0},
      {"fc1/biases/Adam", "fc1/biases", "Adam", 0, biases_adam, 0},
      {p1.name, "fc1/weights", "", p1.offset, extract_slice(p1, weights), 1},
      {p1.name + "/Adam", "fc1/weights", "Adam", p1.offset, extract_slice(p1, weights_adam), 1}};
    for (int shard = 0; shard < 2; ++shard) {
      auto file = "ps-" + std::to_string(shard) + ".safetensors";
      std::vector<safetensors_writer::entry> entries;
      for (auto& i : items)
        if (i.shard == shard) {
          entries.push_back({i.key, i.value.shape()});
          m.tensors.push_back({i.key, i.variable, i.slot, 0, i.offset, file});
        }
      safetensors_writer w((fs::path(staging) / file).string(), entries, {{"step", "x"}});
      for (auto& i : items)
        if (i.shard == shard)
          w.append(i.value);
      auto [crc, bytes] = w.finish();
      m.files.push_back({file, crc, bytes});
    }
    return dir.commit(staging, m, keep);
  }
};

template <class F>
std::string error_of(F f) {
  return testing::message_of<checkpoint_error>(f);
}

using testing::contains;

void corrupt_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x40));
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_tests)

BOOST_AUTO_TEST_CASE(a_checkpoint_reads_back_what_was_saved) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  auto path = model.save(dir, 2000);
  BOOST_TEST(path == log.root + "/ckpt-2000");
  BOOST_TEST(*dir.latest() == path);
  checkpoint_reader r(path);
  BOOST_TEST(r.manifest().step == 2000);
  BOOST_TEST(r.manifest().fingerprint.at("optimizer") == "adam");
  BOOST_TEST(r.manifest().data.at(0).offset == 17u);
  BOOST_TEST(r.manifest().data.at(0).share_count == 0); // not recorded: its index of the listed
  auto& joiner = r.manifest().data.at(1);
  BOOST_TEST((joiner.worker == 3 && joiner.epoch == 2u && joiner.offset == 5u));
  BOOST_TEST((joiner.share_rank == 1 && joiner.share_count == 3));
  BOOST_TEST(r.assemble("fc1/weights").bit_equal(model.weights));
  BOOST_TEST(r.assemble("fc1/weights", "Adam").bit_equal(model.weights_adam));
  BOOST_TEST(r.assemble("fc1/biases").bit_equal(model.biases));
  BOOST_TEST(r.slots_of("fc1/weights") == std::vector<std::string>{"Adam"});
  // The pointer file speaks TensorFlow's format.
  std::ifstream pointer(log.root + "/checkpoint");
  std::string line;
  std::getline(pointer, line);
  BOOST_TEST(line == "model_checkpoint_path: \"ckpt-2000\"");
}

BOOST_AUTO_TEST_CASE(saved_on_two_shards_restored_onto_three) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  checkpoint_reader r(model.save(dir, 10));
  auto full = r.assemble("fc1/weights", "Adam");
  auto three = split_variable(variable_spec{"fc1/weights", {6, 4}, {}}, 3, 0);
  for (auto& s : three) // rows 0-1, 2-3, 4-5: each straddles the saved split differently
    BOOST_TEST(extract_slice(s, full).bit_equal(extract_slice(s, model.weights_adam)), s.name);
}

BOOST_AUTO_TEST_CASE(a_corrupt_file_is_named) {
  log_dir log;
  checkpoint_dir dir(log.root);
  auto path = saved_model{}.save(dir, 10);
  corrupt_byte(path + "/ps-1.safetensors", 200);
  auto err = error_of([&] { checkpoint_reader{path}; });
  BOOST_TEST(contains(err, "ps-1.safetensors: checksum mismatch (corrupt)"), err);
}

BOOST_AUTO_TEST_CASE(a_truncated_file_is_named) {
  log_dir log;
  checkpoint_dir dir(log.root);
  auto path = saved_model{}.save(dir, 10);
  fs::resize_file(path + "/ps-0.safetensors", 100);
  auto err = error_of([&] { checkpoint_reader{path}; });
  BOOST_TEST(contains(err, "ps-0.safetensors: holds 100 bytes, the manifest says"), err);
  // The file alone, without the manifest's sizes: its own header catches it.
  err = error_of([&] { safetensors_file{path + "/ps-0.safetensors"}; });
  BOOST_TEST(contains(err, "ps-0.safetensors: header claims"), err);
}

BOOST_AUTO_TEST_CASE(a_corrupt_manifest_is_named) {
  log_dir log;
  checkpoint_dir dir(log.root);
  auto path = saved_model{}.save(dir, 10);
  std::ofstream(path + "/manifest.json") << "{\"format\":\"troupe-checkpoint\",\"version\":1}";
  auto err = error_of([&] { checkpoint_reader{path}; });
  BOOST_TEST(contains(err, "manifest.json: lacks \"step\""), err);
  std::ofstream(path + "/manifest.json") << "{\"format\": ";
  err = error_of([&] { checkpoint_reader{path}; });
  BOOST_TEST(contains(err, "manifest.json: invalid JSON at byte"), err);
}

BOOST_AUTO_TEST_CASE(only_the_newest_are_kept) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  for (int64_t step = 100; step <= 700; step += 100)
    model.save(dir, step, 3);
  auto kept = dir.complete();
  BOOST_TEST(kept
             == (std::vector<std::string>{log.root + "/ckpt-700", log.root + "/ckpt-600",
                                          log.root + "/ckpt-500"}));
  BOOST_TEST(*dir.latest() == log.root + "/ckpt-700");
}

BOOST_AUTO_TEST_CASE(a_torn_save_leaves_the_previous_checkpoint_latest) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  model.save(dir, 100);
  // A save killed after half a file: never committed.
  auto staging = dir.begin(200);
  {
    safetensors_writer w(staging + "/ps-0.safetensors", {{"fc1/biases", {4}}, {"x", {4}}});
    w.append(model.biases);
  }
  BOOST_TEST(*dir.latest() == log.root + "/ckpt-100");
  BOOST_TEST(dir.complete().size() == 1u);
  BOOST_TEST(checkpoint_reader(*dir.latest()).manifest().step == 100);
  // The next save clears the leftovers.
  model.save(dir, 300);
  BOOST_TEST(!fs::exists(staging));
}

BOOST_AUTO_TEST_CASE(safetensors_headers_are_checked_before_reading) {
  log_dir log;
  fs::create_directories(log.root);
  auto write = [&](const std::string& header, size_t data_bytes) {
    auto path = log.root + "/f.safetensors";
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data_bytes, '\0');
    return path;
  };
  auto err = [&](const std::string& header, size_t data_bytes) {
    return error_of([&] { safetensors_file{write(header, data_bytes)}; });
  };
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4),
                      "dtype must be F32"));
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8),
                      "outside the 8 bytes"));
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                      "needs 12 bytes"));
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
                      "hole or an overlap"));
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],)"
                          R"("data_offsets":[0,8]}})",
                          8),
                      "too large"));
  BOOST_TEST(contains(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12),
                      "4 bytes follow the last tensor"));
  // A length that claims more than the file holds.
  {
    std::ofstream out(log.root + "/g.safetensors", std::ios::binary);
    uint64_t n = uint64_t{1} << 40;
    out.write(reinterpret_cast<const char*>(&n), 8);
  }
  auto huge = error_of([&] { safetensors_file{log.root + "/g.safetensors"}; });
  BOOST_TEST(contains(huge, "header claims 1099511627776 bytes"), huge);
}

BOOST_AUTO_TEST_CASE(restore_is_auto_never_or_a_directory_and_never_empty) {
  BOOST_TEST(!restore_request::parse(""));
  BOOST_TEST((restore_request::parse("auto")->how == restore_request::kind::automatic));
  BOOST_TEST((restore_request::parse("never")->how == restore_request::kind::never));
  auto named = restore_request::parse("logs/ckpt-100");
  BOOST_TEST((named->how == restore_request::kind::directory));
  BOOST_TEST(named->directory == "logs/ckpt-100");
}

BOOST_AUTO_TEST_CASE(auto_restores_the_latest_or_the_newest_that_checks_out) {
  log_dir log;
  checkpoint_dir dir(log.root);
  BOOST_TEST(
    !choose_checkpoint(log.root, restore_request{}).reader);    // nothing there: from the seed
  BOOST_TEST(!choose_checkpoint("", restore_request{}).reader); // checkpoints off
  saved_model model;
  model.save(dir, 100);
  auto latest = model.save(dir, 200);
  BOOST_TEST(choose_checkpoint(log.root, restore_request{}).reader->manifest().step == 200);
  BOOST_TEST(!choose_checkpoint(log.root, *restore_request::parse("never")).reader);
  BOOST_TEST(choose_checkpoint(log.root, *restore_request::parse(log.root + "/ckpt-100"))
               .reader->manifest()
               .step
             == 100);
  corrupt_byte(latest + "/ps-0.safetensors", 150);
  auto fallback = choose_checkpoint(log.root, restore_request{});
  BOOST_TEST(fallback.reader->manifest().step == 100);
  BOOST_REQUIRE(fallback.warnings.size() == 1u);
  BOOST_TEST(contains(fallback.warnings[0], "ckpt-200/ps-0.safetensors: checksum mismatch"));
  corrupt_byte(log.root + "/ckpt-100/manifest.json", 3);
  auto none = error_of([&] { choose_checkpoint(log.root, restore_request{}); });
  BOOST_TEST(contains(none, "no usable checkpoint in " + log.root), none);
  BOOST_TEST(contains(none, "--restore=never"), none);
  auto named = error_of(
    [&] { choose_checkpoint(log.root, *restore_request::parse(log.root + "/ckpt-999")); });
  BOOST_TEST(contains(named, "ckpt-999/manifest.json: cannot open"), named);
}

// Issue 25: a manifest that lied about its layout was refused only when the
// shards were filled (exit 1, no fallback), and one whose step disagreed with
// its shards' update counts was accepted. Now every lie is refused when the
// checkpoint is opened: before anything starts, and --restore=auto falls back.
BOOST_AUTO_TEST_CASE(a_manifest_that_lies_about_its_layout_is_refused_at_open) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  model.save(dir, 10);
  auto path = model.save(dir, 20);
  auto manifest_path = path + "/manifest.json";
  auto honest = read_file_bounded(manifest_path, 1 << 20);
  struct lie {
    std::string what;
    std::function<void(checkpoint_manifest&)> change;
    std::string named;
  };
  auto index_of = [](const checkpoint_manifest& m, const std::string& key) {
    for (size_t i = 0; i < m.tensors.size(); ++i)
      if (m.tensors[i].key == key)
        return i;
    throw std::runtime_error("no " + key);
  };
  auto p1 = model.part(1).name;
  std::vector<lie> lies{
    {"an offset", [&](auto& m) { m.tensors[index_of(m, p1)].offset = 2; },
     "the slices of fc1/weights leave a gap or overlap at index 3"},
    {"an axis", [&](auto& m) { m.tensors[index_of(m, p1)].axis = 1; }, "split along two axes"},
    {"a duplicate slice", [&](auto& m) { m.tensors.push_back(m.tensors[index_of(m, p1)]); },
     "lists tensor '" + p1 + "' of ps-1.safetensors twice"},
    {"a missing slice",
     [&](auto& m) { m.tensors.erase(m.tensors.begin() + static_cast<long>(index_of(m, p1))); },
     "the slices of fc1/weights end at 3 of 6"},
    {"a missing slot slice",
     [&](auto& m) {
       m.tensors.erase(m.tensors.begin() + static_cast<long>(index_of(m, p1 + "/Adam")));
     },
     "the slices of fc1/weights (slot Adam) end at 3 of 6"},
    {"a shard's update count",
     [&](auto& m) {
       m.shard_updates = {20, 17};
     },
     "ps:1 had applied 17 update(s) when saved, but the checkpoint claims step 20"},
    {"a data share", [&](auto& m) { m.data.at(1).share_rank = 3; },
     "a data position \"share_rank\" must be an integer in 0..2"},
    {"the step", [&](auto& m) { m.step = 25; },
     "ps:0 had applied 20 update(s) when saved, but the checkpoint claims step 25"},
  };
  for (auto& l : lies) {
    auto m = checkpoint_manifest::from_json(json::parse(honest), manifest_path);
    l.change(m);
    std::ofstream(manifest_path, std::ios::trunc) << json::write(m.to_json()) << "\n";
    auto err = error_of([&] { checkpoint_reader{path}; });
    BOOST_TEST(contains(err, l.named), l.what << ": " << err);
    auto fallback = choose_checkpoint(log.root, restore_request{});
    BOOST_TEST(fallback.reader->manifest().step == 10, l.what);
    BOOST_TEST(
      contains(error_of([&] { choose_checkpoint(log.root, *restore_request::parse(path)); }),
               l.named),
      l.what);
  }
  std::ofstream(manifest_path, std::ios::trunc) << honest;
  BOOST_TEST(checkpoint_reader{path}.manifest().step == 20);
}

// A NaN saved by a diverged run is refused at open (exit 2 at start, or
// --restore=auto falls back), not when a shard is filled.
BOOST_AUTO_TEST_CASE(a_checkpoint_holding_a_nan_is_refused_at_open) {
  log_dir log;
  checkpoint_dir dir(log.root);
  saved_model model;
  model.save(dir, 10);
  model.weights[13] = std::numeric_limits<float>::quiet_NaN();
  auto path = model.save(dir, 20);
  auto err = error_of([&] { checkpoint_reader{path}; });
  BOOST_TEST(
    contains(err, "ps-1.safetensors: tensor '" + model.part(1).name + "' holds nan at index 1"),
    err);
  BOOST_TEST(choose_checkpoint(log.root, restore_request{}).reader->manifest().step == 10);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_another_model_or_optimizer_is_refused) {
  log_dir log;
  checkpoint_dir dir(log.root);
  checkpoint_reader r(saved_model{}.save(dir, 10));
  std::vector<variable_spec> same{{"fc1/weights", {6, 4}, {}}, {"fc1/biases", {4}, {}}};
  std::map<std::string, std::string> fp{{"model", "test"}, {"optimizer", "adam"}};
  BOOST_TEST(restore_problems(r.manifest(), fp, same).empty());
  std::vector<variable_spec> wider{
    {"fc1/weights", {6, 8}, {}}, {"fc1/biases", {4}, {}}, {"fc2/weights", {8, 2}, {}}};
  auto problems = restore_problems(r.manifest(), fp, wider);
  BOOST_REQUIRE(problems.size() == 2u);
  BOOST_TEST(problems[0]
             == "variable fc1/weights is [6, 4] in the checkpoint but [6, 8] in this model");
  BOOST_TEST(contains(problems[1], "variable fc2/weights [8, 2] is not in the checkpoint"));
  fp["optimizer"] = "sgd";
  problems = restore_problems(r.manifest(), fp, same);
  BOOST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0]
             == "the checkpoint was written with optimizer = 'adam', this run uses 'sgd'");
  BOOST_TEST(checkpoint_fingerprint(model_kind::mlp, optimizer_kind::adam).at("slots")
             == "Adam,Adam_1");
}

BOOST_AUTO_TEST_SUITE_END()
