#include "actors/protocol/report_frames.hpp"

#include <cstring>

namespace troupe {

namespace {

uint64_t bits_of(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

double double_of(uint64_t bits) {
  double v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// The count a batch begins with, checked against 1..most (0..most for grants).
bool count_of(bulk::meta_reader& in, size_t least, size_t most, size_t& n) {
  auto count = in.i32();
  if (!in.ok() || count < 0 || static_cast<size_t>(count) < least
      || static_cast<size_t>(count) > most)
    return false;
  n = static_cast<size_t>(count);
  return true;
}

} // namespace

void write_reports(bulk::meta_writer& out, const step_report* reports, size_t n) {
  out.i32(static_cast<int32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    auto& r = reports[i];
    out.u64(r.run)
      .i32(r.worker)
      .i64(r.step)
      .u8(r.applied ? 1 : 0)
      .u64(bits_of(r.loss))
      .u64(r.correct)
      .u64(r.examples)
      .u64(r.data_epoch)
      .u64(r.data_offset)
      .i32(r.share_rank)
      .i32(r.share_count)
      .u64(r.receipt);
  }
}

bool read_reports(bulk::meta_reader& in, size_t most, std::vector<step_report>& out) {
  out.clear();
  size_t n = 0;
  if (!count_of(in, 1, most, n))
    return false;
  out.resize(n);
  bool flags_ok = true;
  for (auto& r : out) {
    r.run = in.u64();
    r.worker = in.i32();
    r.step = in.i64();
    auto applied = in.u8();
    flags_ok = flags_ok && applied <= 1;
    r.applied = applied == 1;
    r.loss = double_of(in.u64());
    r.correct = in.u64();
    r.examples = in.u64();
    r.data_epoch = in.u64();
    r.data_offset = in.u64();
    r.share_rank = in.i32();
    r.share_count = in.i32();
    r.receipt = in.u64();
  }
  if (!flags_ok || !in.at_end()) {
    out.clear();
    return false;
  }
  return true;
}

void write_grants(bulk::meta_writer& out, const std::vector<step_grant>& grants) {
  out.i32(static_cast<int32_t>(grants.size()));
  for (auto& g : grants)
    out.i64(g.step).u8(g.stop ? 1 : 0).u64(g.proof);
}

bool read_grants(bulk::meta_reader& in, size_t most, std::vector<step_grant>& out) {
  out.clear();
  size_t n = 0;
  if (!count_of(in, 0, most, n))
    return false;
  out.resize(n);
  bool flags_ok = true;
  for (auto& g : out) {
    g.step = in.i64();
    auto stop = in.u8();
    flags_ok = flags_ok && stop <= 1;
    g.stop = stop == 1;
    g.proof = in.u64();
  }
  if (!flags_ok || !in.at_end()) {
    out.clear();
    return false;
  }
  return true;
}

} // namespace troupe
