#pragma once
// The bulk path's framing (docs/protocol.md, "Bulk path"): pulls and pushes
// between a worker and a shard in another process travel on a TCP
// connection of their own, as frames of a fixed 32-byte header, a small meta
// section (shapes first, then the frame's fields) and the tensors' floats as
// one raw block each, sent straight from and read straight into the
// tensors' storage. Nothing is allocated for a frame before its header and
// shapes passed the limits. Free of CAF: the server and the client drive
// these with their own sockets.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/uio.h>

#include "actors/net/channel.hpp"
#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe::bulk {

/// "TRPB" on a little-endian host.
constexpr uint32_t frame_magic = 0x42505254;
/// Bumped with the bulk framing; independent of protocol_version.
constexpr uint16_t frame_version = 5;
/// The most bytes a meta section may have (names and shapes, never values).
constexpr uint32_t max_meta_bytes = 1u << 20;
/// The most tensors one frame may carry.
constexpr uint32_t max_frame_tensors = 1u << 16;

enum class frame_kind : uint16_t {
  hello = 1,   ///< client -> server: (run, ticket, label); must come first
  welcome = 2, ///< server -> client: (shard index)
  /// client -> server: (run, names, wire precision, table count, each
  /// table's id) + each table's keys [n, 2] (each int64 key's bits in two
  /// floats)
  pull = 3,
  pull_reply = 4, ///< server -> client: (version) + values, then each table's rows [n, dim]
  /// client -> server, one step's push: (run, worker, step, proof, wire
  /// precision, names, table count, each table's id) + gradients, then per
  /// table keys [n, 2], counts [n] (each uint32 occurrence count's bits in a
  /// float) and summed gradients [n, dim]
  push = 5,
  push_reply = 6, ///< server -> client: (version, the shard's receipt for the step)
  refusal = 7,    ///< server -> client: (errc, message)
  fetch = 8,      ///< client -> server: (run, copy ticket, index); answered by a pull_reply
  // 9 and 10 carried rows apart from dense values before framing version 5.
  /// worker -> chief, on the report channel (report_channel.hpp): a batch
  /// of step reports (count, then each report's fields); answered by grants
  report = 11,
  /// chief -> worker: the grants answering a batch (count, then each
  /// grant's step, stop and proof)
  grants = 12,
};
/// The last kind: check_header refuses any above it.
constexpr frame_kind last_frame_kind = frame_kind::grants;

struct frame_header {
  uint32_t magic = frame_magic;
  uint16_t version = frame_version;
  uint16_t kind = 0;
  uint64_t request = 0; ///< a reply carries its request's number
  uint32_t meta_bytes = 0;
  uint32_t reserved = 0;
  uint64_t data_bytes = 0; ///< the floats after the meta section, all tensors
};
static_assert(sizeof(frame_header) == 32, "the header is 32 bytes on the wire");

/// What a reader accepts: each tensor at most max_elements, all of a
/// frame's floats at most max_data_bytes, its meta section at most
/// max_meta (a hello's, before any ticket is shown: a few fields).
struct frame_limits {
  size_t max_elements = size_t{1} << 28;
  uint64_t max_data_bytes = uint64_t{1} << 32;
  uint32_t max_meta = max_meta_bytes;
};

/// The meta section a hello may have: run, ticket and a short label.
constexpr uint32_t max_hello_meta_bytes = 4096;

/// A header's fields against the limits, before anything else is read.
maybe_failure check_header(const frame_header& head, const frame_limits& limits);

/// The tensors a frame carries, wherever they live.
using tensor_refs = std::vector<const tensor*>;
tensor_refs refs_of(const std::vector<tensor>* tensors);

/// Appends a meta section's fields: the shapes of the frame's tensors first
/// (every frame has the list, empty without data), then the kind's fields.
class meta_writer {
public:
  explicit meta_writer(const std::vector<tensor>* tensors = nullptr)
    : meta_writer(refs_of(tensors)) {}
  explicit meta_writer(const tensor_refs& tensors);
  meta_writer& u8(uint8_t v) { return scalar(v); }
  meta_writer& i32(int32_t v) { return scalar(v); }
  meta_writer& u64(uint64_t v) { return scalar(v); }
  meta_writer& i64(int64_t v) { return scalar(v); }
  meta_writer& text(std::string_view v);
  meta_writer& names(const std::vector<std::string>& v);
  const std::string& bytes() const noexcept { return out_; }

private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  template <class T>
  meta_writer& scalar(T v) {
    raw(&v, sizeof(v));
    return *this;
  }
  std::string out_;
};

/// Reads a meta section's fields in the writer's order; the first field it
/// cannot read (past the end, a count beyond what is left) makes ok() false
/// and every later read return zero or empty.
class meta_reader {
public:
  explicit meta_reader(std::string_view bytes) : rest_(bytes) {}
  /// The leading shape list, checked: rank <= 8, no negative dimension, at
  /// most limits.max_elements each, and data_bytes exactly their floats.
  maybe_failure shapes(std::vector<shape_t>& out, uint64_t data_bytes, const frame_limits& limits);
  uint8_t u8() { return scalar<uint8_t>(); }
  int32_t i32() { return scalar<int32_t>(); }
  uint64_t u64() { return scalar<uint64_t>(); }
  int64_t i64() { return scalar<int64_t>(); }
  std::string text();
  std::vector<std::string> names();
  bool ok() const noexcept { return ok_; }
  size_t remaining() const noexcept { return rest_.size(); }
  /// True when every byte was read (a longer meta section is malformed).
  bool at_end() const noexcept { return ok_ && rest_.empty(); }

private:
  bool take(void* p, size_t n);
  template <class T>
  T scalar() {
    T v;
    take(&v, sizeof(v));
    return v;
  }
  std::string_view rest_;
  bool ok_ = true;
};

/// Embedding keys and counts travel as tensors holding their bits (frames
/// carry floats only): keys [n, 2], counts [n]. Copies, never conversions.
tensor key_bits(const int64_t* keys, size_t n);
tensor count_bits(const uint32_t* counts, size_t n);
/// The keys and counts such tensors hold; empty (and false) where a tensor
/// has another shape than keys [n, 2] or counts [n].
bool keys_of(const tensor& bits, std::vector<int64_t>& out);
bool counts_of(const tensor& bits, size_t n, std::vector<uint32_t>& out);

class frame_writer;
/// A refusal frame answering `request`: (uint8 errc, string message).
frame_writer refusal_frame(uint64_t request, const failure& why);
/// A refusal's fields, or nullopt where they are malformed (extra bytes, a
/// code outside errc's).
std::optional<failure> read_refusal(meta_reader fields);

/// One frame to send, or several back to back: header and meta in one
/// buffer, the tensors' floats referenced in place (they must outlive the
/// writer).
class frame_writer {
public:
  frame_writer() = default;
  frame_writer(frame_kind kind, uint64_t request, const meta_writer& meta,
               const std::vector<tensor>* tensors = nullptr)
    : frame_writer(kind, request, meta, refs_of(tensors)) {}
  frame_writer(frame_kind kind, uint64_t request, const meta_writer& meta,
               const tensor_refs& tensors);
  /// `next` sent right after this writer's frames (not yet begun: its
  /// tensors must outlive this writer), in the same calls: requests sent
  /// together leave in one system call where the socket takes them.
  void append(frame_writer next);
  /// Sends what the channel takes without blocking: true once all is sent;
  /// a failure on a socket or TLS error.
  bool send_some(channel& ch, maybe_failure& error);
  /// Every byte taken by the channel and sent on (TLS may hold some).
  bool done() const noexcept { return next_ == chunks_.size() && !unflushed_; }

private:
  /// Where a frame's header and meta lie in heads_, and its chunk.
  struct head_chunk {
    size_t chunk;
    size_t offset;
    size_t length;
  };
  std::string heads_;
  std::vector<head_chunk> head_chunks_;
  std::vector<iovec> chunks_;
  size_t next_ = 0;        // first chunk not fully sent
  size_t offset_ = 0;      // bytes of it already sent
  bool unflushed_ = false; // all taken, some still in the channel
};

/// Reads one frame at a time from a non-blocking socket: the header (checked
/// at once), the meta section, the shapes (checked), then the floats straight
/// into the tensors, whose storage is kept from frame to frame.
class frame_reader {
public:
  explicit frame_reader(frame_limits limits) : limits_(limits) {}
  /// Reads what the channel has. True once a whole frame is in (or, when
  /// pausing before data, its header and meta section); false with `error`
  /// empty when more is to come, set on a bad frame or a socket error (a
  /// closed connection included).
  bool receive_some(channel& ch, maybe_failure& error);
  /// From the next frame on: stop once header and meta are in, before
  /// anything is allocated for the data (a server first takes its turn);
  /// read_data() goes on.
  void pause_before_data(bool pause) noexcept { pause_ = pause; }
  /// Header and meta are in, the data not yet read (see pause_before_data).
  bool paused() const noexcept { return phase_ == phase::paused; }
  /// Sizes the tensors for the data (in storage lent before, if any); the
  /// next receive_some reads it.
  void read_data();
  /// The next receive_some reads the data and throws it away, allocating
  /// nothing (a refused push, so that its sender reads the refusal).
  void skip_data();
  /// The frame just completed; next() starts reading the following one.
  const frame_header& header() const noexcept { return head_; }
  /// The shapes of the frame's tensors (checked), known once its meta is in.
  const std::vector<shape_t>& shapes() const noexcept { return shapes_; }
  meta_reader fields() const;
  std::vector<tensor>& tensors() noexcept { return tensors_; }
  void next();
  /// Tensors to read the next frame's floats into (their storage is reused).
  void lend(std::vector<tensor> storage) { tensors_ = std::move(storage); }

private:
  maybe_failure on_header();
  maybe_failure on_meta();
  /// What one read of a phase leaves: more to read now, nothing until the
  /// socket has more (or an error), or a frame (or its head) complete.
  enum class progress { go_on, wait, complete };
  progress read_header(channel& ch, maybe_failure& error);
  progress read_meta(channel& ch, maybe_failure& error);
  progress read_floats(channel& ch, maybe_failure& error);
  progress skip_floats(channel& ch, maybe_failure& error);
  enum class phase { header, meta, paused, data, skip, done };
  frame_limits limits_;
  bool pause_ = false;
  phase phase_ = phase::header;
  std::vector<shape_t> shapes_; // of the frame's tensors, checked
  frame_header head_;
  std::string meta_;
  size_t fields_at_ = 0; // where the kind's fields start in meta_
  size_t got_ = 0;       // bytes of the current phase's part read so far
  size_t tensor_ = 0;    // tensor being filled in the data phase
  std::vector<tensor> tensors_;
};

} // namespace troupe::bulk
