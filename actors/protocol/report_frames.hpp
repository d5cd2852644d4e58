#pragma once
// The fields of the report channel's frames (actors/net/report_channel.hpp,
// docs/protocol.md "Report channel"): a batch of step reports and the
// grants answering it, each member in the order inspect() lists it.
#include <cstddef>
#include <vector>

#include "actors/net/frame.hpp"
#include "actors/protocol/protocol.hpp"

namespace troupe {

void write_reports(bulk::meta_writer& out, const step_report* reports, size_t n);
inline void write_reports(bulk::meta_writer& out, const std::vector<step_report>& reports) {
  write_reports(out, reports.data(), reports.size());
}
/// False (and `out` empty) when the fields are malformed, hold no report or
/// more than `most`; nothing is allocated before the count is checked.
bool read_reports(bulk::meta_reader& in, size_t most, std::vector<step_report>& out);

void write_grants(bulk::meta_writer& out, const std::vector<step_grant>& grants);
/// False (and `out` empty) when malformed or holding more than `most`.
bool read_grants(bulk::meta_reader& in, size_t most, std::vector<step_grant>& out);

} // namespace troupe
