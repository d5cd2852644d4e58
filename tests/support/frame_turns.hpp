#pragma once
// Two peers of the bulk path in one thread: sends on one channel and reads
// on the other in turns, as two processes would.
#include "actors/net/socket.hpp"

namespace troupe::testing {

/// Sends with `writer` on `from` and reads with `reader` on `to` in turns
/// until the reader has a frame (paused: its head), an error, or `until`.
inline bool interleave(bulk::frame_writer& writer, bulk::frame_reader& reader, bulk::channel& from,
                       bulk::channel& to, maybe_failure& error, bulk::deadline until) {
  bool received = false;
  while (!received && !error && std::chrono::steady_clock::now() < until) {
    if (!writer.done())
      writer.send_some(from, error);
    if (!error)
      received = reader.receive_some(to, error);
  }
  return received;
}

} // namespace troupe::testing
