// Writes the seed corpus of the fuzz targets that read binary formats
// (messages, tensor_wire, data, bulk_frame) into tests/fuzz/corpus/: one
// valid input of each kind, so that fuzzing starts from what peers and
// files really send.
// Run it again when the protocol changes:
//   build/bin/troupe-fuzz-seeds tests/fuzz/corpus
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <type_traits>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/node_id.hpp>

#include "actors/net/frame.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/report_frames.hpp"
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
template <class T>
constexpr uint8_t pick_of() {
  uint8_t pick = 1;
#define TROUPE_PICK(type)                                                                          \
  if (std::is_same_v<T, type>)                                                                     \
    return pick;                                                                                   \
  ++pick;
  TROUPE_MESSAGE_TYPES(TROUPE_PICK)
#undef TROUPE_PICK
  return pick; // past the list: the gate's decoders
}
constexpr uint8_t whole_message = 0;
struct past_the_types {};
constexpr uint8_t direct_gate = pick_of<past_the_types>();
constexpr uint8_t routed_gate = direct_gate + 1;

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
step_push sample_push() {
  return {
    7, 1, 3, 0, 0, {"w"}, {small_tensor()}, {{0, {4, 1LL << 50}, {2, 1}, tensor({2, 9}, 0.25f)}}};
}

pull_request sample_pull() {
  return {7, {"w", "b"}, 0, {{0, {4, 8}}}};
}

step_report sample_report() {
  step_report report;
  report.run = 7;
  report.step = 12;
  report.applied = true;
  report.loss = 0.5;
  report.receipt = 0x0123456789abcdefULL;
  return report;
}

// Whole messages as peers send them, and the BASP gate's inputs.
void seed_whole_messages(caf::actor_system& sys, const fs::path& messages) {
  auto push = sample_push();
  seed(sys, messages, whole_message, "push", caf::make_message(push_atom::value, push));
  seed(sys, messages, whole_message, "pull", caf::make_message(pull_atom::value, sample_pull()));
  seed(sys, messages, whole_message, "hello",
       caf::make_message(hello_atom::value, protocol_version, std::string("worker"), int32_t{0}));
  seed(sys, messages, whole_message, "reports",
       caf::make_message(reports_atom::value, std::vector<step_report>{sample_report()}));
  std::vector<caf::strong_actor_ptr> no_stages;
  auto message = caf::make_message(push_atom::value, push);
  seed(sys, messages, direct_gate, "gate_direct_push", no_stages, message);
  seed(sys, messages, routed_gate, "gate_routed_push", sys.node(), sys.node(), no_stages, message);
}

// Typed values, each at its type's pick.
void seed_typed_values(caf::actor_system& sys, const fs::path& messages) {
  auto small = small_tensor();
  auto value = [&](const char* name, auto x) {
    seed(sys, messages, pick_of<decltype(x)>(), name, x);
  };
  value("tensor", small);
  value("tensors", std::vector<tensor>{small, tensor({4})});
  value("pull_reply", pull_reply{5, {small}, {tensor({2, 9}, 1.0f)}});
  value("planned_slice", planned_slice{"w/part_0", 1, 0, 0, 0, 392});
  value("planned_slices",
        std::vector<planned_slice>{{"w", 0, 0, 0, 0, 784}, {"b", 1, 1, 0, 0, 10}});
  training_plan plan;
  plan.run = 7;
  plan.slices = {{"w", 0, 0, 0, 0, 784}};
  value("training_plan", plan);
  auto report = sample_report();
  value("step_report", report);
  value("step_grant", step_grant{13, false});
  value("step_summary", step_summary{13, 0.4, 90, 100, 1.5, 1, 2, {0, 1}, {3, 4}, {17, 5}, {}, {}});
  value("variable_traffic", variable_traffic{"w", 100, 200});
  value("variable_traffics", std::vector<variable_traffic>{{"w", 1, 2}});
  shard_traffic traffic;
  traffic.variables = {{"w", 1, 2}};
  value("shard_traffic", traffic);
  value("shard_options", shard_options{true, 2, 100, {}, 40, 0, 0, {}, 1});
  value("snapshot_index",
        snapshot_index{40, 0x1234567890abcdefULL, {"w", "w/Adam"}, {{2, 3}, {2, 3}}, {}, {}});
  value("step_coordinator_actor", step_coordinator_actor{});
  value("token_queue_actor", token_queue_actor{});
  value("ps_shard_actor", ps_shard_actor{});
  value("chief_actor", chief_actor{});
  value("worker_actor", worker_actor{});
  table_setup table;
  table.table.name = "embedding";
  table.table.dim = 9;
  value("table_setup", table);
  value("table_setups", std::vector<table_setup>{table, table});
  value("restored_rows", restored_rows{0, {5, 6}, {1, 2}, {0, 3}, tensor({2, 18}, 0.5f)});
  value("table_report", table_report{"embedding", 10, 400, 10, 0, 0, {5}, {9}});
  value("table_reports", std::vector<table_report>{{"embedding", 1, 40, 1, 0, 0, {}, {}}});
  value("step_reports", std::vector<step_report>{report, report});
  value("step_grants", std::vector<step_grant>{{13, false, 5}, {14, false, 6}});
  value("checkpoint_chunk", checkpoint_chunk{"bytes", 99});
  value("pull_request", sample_pull());
  value("step_push", sample_push());
  value("push_receipt", push_receipt{4, 0xfeedULL});
}

void seed_messages(caf::actor_system& sys, const fs::path& messages) {
  seed_whole_messages(sys, messages);
  seed_typed_values(sys, messages);
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

// One bulk frame's bytes as a peer sends it: the header, the meta section,
// then each tensor's floats.
std::vector<char> frame(bulk::frame_kind kind, uint64_t request, const bulk::meta_writer& meta,
                        const bulk::tensor_refs& tensors = {}) {
  bulk::frame_header head;
  head.kind = static_cast<uint16_t>(kind);
  head.request = request;
  head.meta_bytes = static_cast<uint32_t>(meta.bytes().size());
  for (auto* t : tensors)
    head.data_bytes += t->bytes();
  std::vector<char> out(reinterpret_cast<const char*>(&head),
                        reinterpret_cast<const char*>(&head) + sizeof(head));
  out.insert(out.end(), meta.bytes().begin(), meta.bytes().end());
  for (auto* t : tensors) {
    auto* bytes = reinterpret_cast<const char*>(t->data());
    out.insert(out.end(), bytes, bytes + t->bytes());
  }
  return out;
}

// The bulk_frame target: every kind as the peers write it, and a few a
// stranger might (a NaN gradient, a reserved field set, a zero dimension
// beside huge ones).
// What a peer asks: a hello, pulls, pushes (one with a NaN, one with
// empty rows) and a fetch.
void seed_bulk_requests(const fs::path& dir) {
  using bulk::frame_kind;
  int64_t keys[2] = {4, int64_t{1} << 50};
  uint32_t counts[2] = {2, 1};
  auto key_bits = bulk::key_bits(keys, 2);
  auto count_bits = bulk::count_bits(counts, 2);
  tensor row_grads({2, 3}, 0.25f);
  auto tables = [](bulk::meta_writer& m) { m.i32(1).i32(0); };
  bulk::meta_writer hello;
  hello.u64(7).u64(0x1234).text("worker:0");
  write(dir / "hello", frame(frame_kind::hello, 0, hello));
  bulk::tensor_refs pull_data{&key_bits};
  bulk::meta_writer pull{pull_data};
  pull.u64(7).names({"w"}).i32(0);
  tables(pull);
  write(dir / "pull", frame(frame_kind::pull, 1, pull, pull_data));
  for (auto [name, g] :
       {std::pair{"push", 0.5f}, std::pair{"push_nan", std::numeric_limits<float>::quiet_NaN()}}) {
    tensor gradient({2, 2}, g);
    bulk::tensor_refs data{&gradient, &key_bits, &count_bits, &row_grads};
    bulk::meta_writer push{data};
    push.u64(7).i32(0).i64(3).u64(0xfeed).i32(0).names({"w"});
    tables(push);
    write(dir / name, frame(frame_kind::push, 2, push, data));
  }
  tensor no_keys({0, 2}), no_counts({0}), no_grads({0, 3});
  bulk::tensor_refs empty_data{&no_keys, &no_counts, &no_grads};
  bulk::meta_writer empty_rows{empty_data};
  empty_rows.u64(7).i32(0).i64(3).u64(0xfeed).i32(0).names({});
  tables(empty_rows);
  write(dir / "push_empty_rows", frame(frame_kind::push, 3, empty_rows, empty_data));
  bulk::meta_writer fetch;
  fetch.u64(7).u64(0x77).i32(1);
  write(dir / "fetch", frame(frame_kind::fetch, 4, fetch));
}

// What a server answers: a welcome, a pull's values and rows, a push's
// version and receipt, a refusal, and the report channel's frames.
void seed_bulk_answers(const fs::path& dir) {
  using bulk::frame_kind;
  bulk::meta_writer welcome;
  welcome.i32(0);
  write(dir / "welcome", frame(frame_kind::welcome, 0, welcome));
  tensor value({2, 2}, 1.5f), rows({2, 3}, -1.0f);
  bulk::tensor_refs reply_data{&value, &rows};
  bulk::meta_writer reply{reply_data};
  reply.i64(3);
  write(dir / "pull_reply", frame(frame_kind::pull_reply, 1, reply, reply_data));
  bulk::meta_writer push_reply;
  push_reply.i64(4).u64(0xabcdef);
  write(dir / "push_reply", frame(frame_kind::push_reply, 2, push_reply));
  bulk::meta_writer refusal;
  refusal.u8(static_cast<uint8_t>(errc::stale_gradient)).text("step 3 is stale");
  write(dir / "refusal", frame(frame_kind::refusal, 2, refusal));
  step_report report;
  report.run = 7;
  report.step = 12;
  report.applied = true;
  report.receipt = 0x99;
  bulk::meta_writer reports;
  write_reports(reports, &report, 1);
  write(dir / "report", frame(frame_kind::report, 5, reports));
  bulk::meta_writer grants;
  write_grants(grants, {{13, false, 5}, {14, true, 0}});
  write(dir / "grants", frame(frame_kind::grants, 5, grants));
}

// Headers no writer makes: a reserved field set, and shapes [0, 2^40] and
// [2^40, 0] (no float, but a product past every limit).
void seed_bulk_oddities(const fs::path& dir) {
  using bulk::frame_kind;
  bulk::meta_writer welcome;
  welcome.i32(0);
  auto reserved = frame(frame_kind::welcome, 0, welcome);
  reserved[offsetof(bulk::frame_header, reserved)] = 3;
  write(dir / "reserved-field-not-zero", reserved);
  std::string meta;
  auto put = [&](const void* p, size_t n) { meta.append(static_cast<const char*>(p), n); };
  uint32_t two = 2, rank = 2;
  int64_t zero = 0, huge = int64_t{1} << 40;
  put(&two, 4), put(&rank, 4), put(&zero, 8), put(&huge, 8), put(&rank, 4), put(&huge, 8),
    put(&zero, 8);
  auto odd = frame(frame_kind::pull, 6, bulk::meta_writer{});
  bulk::frame_header head;
  std::memcpy(&head, odd.data(), sizeof(head));
  head.meta_bytes = static_cast<uint32_t>(meta.size());
  odd.assign(reinterpret_cast<const char*>(&head),
             reinterpret_cast<const char*>(&head) + sizeof(head));
  odd.insert(odd.end(), meta.begin(), meta.end());
  write(dir / "zero-dimension-beside-huge-ones", odd);
}

void seed_bulk_frames(const fs::path& dir) {
  seed_bulk_requests(dir);
  seed_bulk_answers(dir);
  seed_bulk_oddities(dir);
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
  seed_bulk_frames(root / "bulk_frame");
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
