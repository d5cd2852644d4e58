// Fuzz target: the bulk path's framing (actors/net/frame.hpp) and the
// report channel's fields (actors/protocol/report_frames.hpp), as a shard
// (pausing before the data, as its turns do; inputs of odd length) or a
// worker reads it from a socket. Whatever is accepted as a frame must
// write and read again to the same header, fields and bits; anything else
// must be refused without a crash, a hang or an allocation beyond the limits.
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "actors/net/socket.hpp"
#include "actors/protocol/report_frames.hpp"
#include "tests/fuzz/fuzz_target.hpp"

using namespace troupe;
using namespace troupe::bulk;

namespace {

const frame_limits limits{size_t{1} << 16, uint64_t{1} << 20};

bool read_one(const uint8_t* data, size_t size, frame_reader& reader) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
    std::abort();
  channel a{socket_fd{fds[0]}}, b{socket_fd{fds[1]}};
  prepare(b.fd());
  int buffer = 1 << 20;
  ::setsockopt(a.fd(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  if (size > 0 && ::send(a.fd(), data, size, 0) != static_cast<ssize_t>(size))
    return false; // more than a socket holds: not an input worth fuzzing
  a = channel{};
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  reader.pause_before_data(size % 2 == 1);
  if (receive_frame(b, reader, until))
    return false;
  if (!reader.paused())
    return true;
  reader.read_data();
  return !receive_frame(b, reader, until);
}

// A request's tables: a count, then each table's id (bounded as the shard bounds it).
bool copy_tables(meta_reader& fields, meta_writer& again) {
  auto count = fields.i32();
  if (count < 0 || count > 1024)
    return false;
  again.i32(count);
  for (int32_t t = 0; t < count; ++t)
    again.i32(fields.i32());
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  frame_reader first{limits};
  if (!read_one(data, size, first))
    return 0; // refused
  auto head = first.header();
  // Whatever the kind, its fields as the peers read them.
  auto fields = first.fields();
  meta_writer again{&first.tensors()};
  switch (static_cast<frame_kind>(head.kind)) {
    case frame_kind::hello:
      again.u64(fields.u64()).u64(fields.u64()).text(fields.text());
      break;
    case frame_kind::welcome:
      again.i32(fields.i32());
      break;
    case frame_kind::pull:
      again.u64(fields.u64()).names(fields.names()).i32(fields.i32());
      if (!copy_tables(fields, again))
        return 0;
      break;
    case frame_kind::pull_reply:
      again.i64(fields.i64());
      break;
    case frame_kind::push_reply:
      again.i64(fields.i64()).u64(fields.u64());
      break;
    case frame_kind::push:
      again.u64(fields.u64()).i32(fields.i32()).i64(fields.i64()).u64(fields.u64());
      again.i32(fields.i32()).names(fields.names());
      if (!copy_tables(fields, again))
        return 0;
      break;
    case frame_kind::refusal:
      again.u8(fields.u8()).text(fields.text());
      break;
    case frame_kind::fetch:
      again.u64(fields.u64()).u64(fields.u64()).i32(fields.i32());
      break;
    case frame_kind::report: { // the report channel's, as the chief reads them
      std::vector<step_report> reports;
      if (!read_reports(fields, 4096, reports))
        return 0;
      write_reports(again, reports);
      break;
    }
    case frame_kind::grants: {
      std::vector<step_grant> grants;
      if (!read_grants(fields, 4096, grants))
        return 0;
      write_grants(again, grants);
      break;
    }
  }
  if (!fields.at_end())
    return 0; // malformed fields: the peers refuse it
  frame_writer writer{static_cast<frame_kind>(head.kind), head.request, again, &first.tensors()};
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
    std::abort();
  channel a{socket_fd{fds[0]}}, b{socket_fd{fds[1]}};
  prepare(a.fd());
  prepare(b.fd());
  frame_reader second{limits};
  maybe_failure error;
  bool received = false;
  for (int turns = 0; !received && !error && turns < 100000; ++turns) {
    if (!writer.done())
      writer.send_some(a, error);
    if (!error)
      received = second.receive_some(b, error);
  }
  if (!received)
    std::abort(); // an accepted frame must write and read again
  if (std::memcmp(&second.header(), &head, sizeof(head)) != 0
      || second.tensors().size() != first.tensors().size())
    std::abort();
  for (size_t i = 0; i < first.tensors().size(); ++i)
    if (!second.tensors()[i].bit_equal(first.tensors()[i]))
      std::abort();
  return 0;
}
