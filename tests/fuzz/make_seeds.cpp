// Writes the seed corpus of the fuzz targets that read binary formats
// (messages, tensor_wire, data) into tests/fuzz/corpus/: one valid input of
// each kind, so that fuzzing starts from what peers and files really send.
// Run it again when the protocol changes:
//   build/bin/troupe-fuzz-seeds tests/fuzz/corpus
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/node_id.hpp>

#include "actors/protocol/protocol.hpp"
#include "actors/protocol/wire.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

struct seed_config : caf::actor_system_config {
  seed_config() {
    load<caf::io::middleman>();
    register_protocol(*this);
  }
};

void write(const fs::path& file, const std::vector<char>& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary)
    .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The messages target's first byte picks the decoder: 0 is a whole
// caf::message, then TROUPE_MESSAGE_TYPES in order, then the broker's gate
// on a direct and on a routed message's payload.
template <class... Ts>
void seed(caf::actor_system& sys, const fs::path& dir, uint8_t pick, const char* name,
          Ts... values) {
  std::vector<char> bytes{static_cast<char>(pick)};
  caf::binary_serializer sink{sys, bytes};
  if (auto err = sink(values...))
    std::fprintf(stderr, "seed %s: %s\n", name, sys.render(err).c_str());
  write(dir / (std::to_string(pick) + "-" + name), bytes);
}

std::vector<char> idx(uint32_t magic, std::vector<uint32_t> dims, std::vector<uint8_t> values) {
  std::vector<char> out;
  auto be32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  be32(magic);
  for (auto d : dims)
    be32(d);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

// A 2x3 tensor with a NaN, an infinity and a negative zero.
tensor small_tensor() {
  return tensor({2, 3}, std::vector<float>{1, -2, 0.5f, std::numeric_limits<float>::quiet_NaN(),
                                           std::numeric_limits<float>::infinity(), -0.0f});
}

// The messages target: one file per message type (CAF's binary format).
void seed_messages(caf::actor_system& sys, const fs::path& messages) {
  auto small = small_tensor();
  seed(sys, messages, 0, "push",
       caf::make_message(push_atom::value, run_id{7}, int32_t{1}, int64_t{3}, uint64_t{0},
                         int32_t{0}, std::vector<std::string>{"w"}, std::vector<tensor>{small}));
  seed(
    sys, messages, 0, "pull",
    caf::make_message(pull_atom::value, run_id{7}, std::vector<std::string>{"w", "b"}, int32_t{0}));
  seed(sys, messages, 0, "hello",
       caf::make_message(hello_atom::value, protocol_version, std::string("worker"), int32_t{0}));
  seed(sys, messages, 1, "tensor", small);
  seed(sys, messages, 2, "tensors", std::vector<tensor>{small, tensor({4})});
  seed(sys, messages, 3, "pull_reply", pull_reply{5, {small}});
  seed(sys, messages, 4, "planned_slice", planned_slice{"w/part_0", 1, 0, 0, 0, 392});
  seed(sys, messages, 5, "planned_slices",
       std::vector<planned_slice>{{"w", 0, 0, 0, 0, 784}, {"b", 1, 1, 0, 0, 10}});
  training_plan plan;
  plan.run = 7;
  plan.slices = {{"w", 0, 0, 0, 0, 784}};
  seed(sys, messages, 6, "training_plan", plan);
  step_report report;
  report.run = 7;
  report.step = 12;
  report.applied = true;
  report.loss = 0.5;
  seed(sys, messages, 7, "step_report", report);
  seed(sys, messages, 8, "step_grant", step_grant{13, false});
  seed(sys, messages, 9, "step_summary",
       step_summary{13, 0.4, 90, 100, 1.5, 1, 2, {0, 1}, {3, 4}, {17, 5}, {}, {}});
  seed(sys, messages, 10, "variable_traffic", variable_traffic{"w", 100, 200});
  seed(sys, messages, 11, "variable_traffics", std::vector<variable_traffic>{{"w", 1, 2}});
  shard_traffic traffic;
  traffic.variables = {{"w", 1, 2}};
  seed(sys, messages, 12, "shard_traffic", traffic);
  seed(sys, messages, 13, "shard_options", shard_options{true, 2, 100, {}, 40, 0, 0, {}, 1});
  seed(sys, messages, 14, "snapshot_index",
       snapshot_index{40, 0x1234567890abcdefULL, {"w", "w/Adam"}, {{2, 3}, {2, 3}}, {}, {}});
  seed(sys, messages, 15, "step_coordinator_actor", step_coordinator_actor{});
  seed(sys, messages, 16, "token_queue_actor", token_queue_actor{});
  seed(sys, messages, 17, "ps_shard_actor", ps_shard_actor{});
  seed(sys, messages, 18, "chief_actor", chief_actor{});
  seed(sys, messages, 19, "worker_actor", worker_actor{});
  // Issue 28's types, after the older ones so that their seeds keep their picks.
  table_setup table;
  table.table.name = "embedding";
  table.table.dim = 9;
  seed(sys, messages, 20, "table_setup", table);
  seed(sys, messages, 21, "table_setups", std::vector<table_setup>{table, table});
  seed(sys, messages, 22, "row_keys", row_keys{{1, 2, int64_t{1} << 50}, {3, 1, 1}});
  restored_rows restored{0, {5, 6}, {1, 2}, {0, 3}, tensor({2, 18}, 0.5f)};
  seed(sys, messages, 23, "restored_rows", restored);
  seed(sys, messages, 24, "table_report", table_report{"embedding", 10, 400, 10, 0, 0, {5}, {9}});
  seed(sys, messages, 25, "table_reports",
       std::vector<table_report>{{"embedding", 1, 40, 1, 0, 0, {}, {}}});
  seed(sys, messages, 0, "rows",
       caf::make_message(rows_atom::value, run_id{7}, int32_t{0}, row_keys{{4, 8}, {}}));
  seed(sys, messages, 0, "push_rows",
       caf::make_message(push_rows_atom::value, run_id{7}, int32_t{1}, int64_t{3}, uint64_t{0},
                         int32_t{0}, row_keys{{4}, {2}}, tensor({1, 9}, 0.25f)));
  // Issue 29's batched reports and their grants.
  seed(sys, messages, 0, "reports",
       caf::make_message(reports_atom::value, std::vector<step_report>{report}));
  seed(sys, messages, 26, "step_reports", std::vector<step_report>{report, report});
  seed(sys, messages, 27, "step_grants", std::vector<step_grant>{{13, false, 5}, {14, false, 6}});
  std::vector<caf::strong_actor_ptr> no_stages;
  auto push = caf::make_message(push_atom::value, run_id{7}, int32_t{1}, int64_t{3}, uint64_t{0},
                                int32_t{0}, std::vector<std::string>{"w"},
                                std::vector<tensor>{small});
  seed(sys, messages, 28, "gate_direct_push", no_stages, push);
  seed(sys, messages, 29, "gate_routed_push", sys.node(), sys.node(), no_stages, push);
}

// The tensor_wire target: tensors as CAF serialises them.
void seed_tensor_wire(const fs::path& wire) {
  auto small = small_tensor();
  for (auto [name, t] : {std::pair{"matrix", small}, std::pair{"empty", tensor()},
                         std::pair{"zero_rows", tensor({0, 5})}}) {
    std::vector<char> bytes;
    caf::binary_serializer sink{nullptr, bytes};
    static_cast<void>(inspect(sink, t));
    write(wire / name, bytes);
  }
}

// The data target (root/data).
void seed_data(const fs::path& root) {
  // The data target: a format byte (0 IDX, 1 .npy, 2 CSV, 3 CSV with
  // skip), two bytes (little-endian) = the first file's length, the files.
  auto data_seed = [&](const char* name, char format, const std::vector<char>& first,
                       const std::vector<char>& second) {
    std::vector<char> bytes{format, static_cast<char>(first.size() & 0xff),
                            static_cast<char>(first.size() >> 8)};
    bytes.insert(bytes.end(), first.begin(), first.end());
    bytes.insert(bytes.end(), second.begin(), second.end());
    write(root / "data" / name, bytes);
  };
  data_seed("idx_two_examples", 0, idx(2051, {2, 2, 2}, {0, 64, 128, 255, 1, 2, 3, 4}),
            idx(2049, {2}, {3, 9}));
  auto npy = [](const std::string& descr, const std::string& shape, const std::vector<char>& data) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape
                         + ", }";
    while ((10 + header.size() + 1) % 64 != 0)
      header += ' ';
    header += '\n';
    std::vector<char> out{'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size()),
                          0};
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
  };
  data_seed("npy_two_examples", 1, npy("|u1", "(2, 3)", {0, 10, 20, 30, 40, (char)250}),
            npy("|u1", "(2,)", {1, 0}));
  std::string csv = "a,b,label\n1.5,2,cat\n-3,4e1,dog\n\"5\",6,cat\n";
  data_seed("csv_three_rows", 2, {csv.begin(), csv.end()}, {});
  std::string bad = "a,b,label\n1,x,0\n2,3\n4,5,1\n6,nan,1\n";
  data_seed("csv_bad_rows_skipped", 3, {bad.begin(), bad.end()}, {});
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  seed_config cfg;
  caf::actor_system sys{cfg};
  seed_messages(sys, root / "messages");
  seed_tensor_wire(root / "tensor_wire");
  seed_data(root);
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
