#include "actors/net/frame.hpp"

#include <algorithm>
#include <cstring>

namespace troupe::bulk {

namespace {

failure malformed(std::string what) {
  return {errc::invalid_request, "bulk frame: " + std::move(what)};
}

} // namespace

maybe_failure check_header(const frame_header& head, const frame_limits& limits) {
  if (head.magic != frame_magic)
    return malformed("wrong magic number (not a Troupe bulk connection)");
  if (head.version != frame_version)
    return failure{errc::protocol_mismatch, "bulk frame: version " + std::to_string(head.version)
                                              + ", this node speaks "
                                              + std::to_string(frame_version)};
  // 9 and 10 are retired (rows apart from dense values, framing version 4).
  if (head.kind < static_cast<uint16_t>(frame_kind::hello)
      || head.kind > static_cast<uint16_t>(last_frame_kind) || head.kind == 9 || head.kind == 10)
    return malformed("unknown kind " + std::to_string(head.kind));
  if (head.reserved != 0)
    return malformed("reserved header field is " + std::to_string(head.reserved) + ", not 0");
  if (head.meta_bytes > std::min(max_meta_bytes, limits.max_meta))
    return malformed("meta section of " + std::to_string(head.meta_bytes)
                     + " bytes exceeds the limit of "
                     + std::to_string(std::min(max_meta_bytes, limits.max_meta)));
  if (head.data_bytes > limits.max_data_bytes)
    return malformed("data of " + std::to_string(head.data_bytes) + " bytes exceeds the limit of "
                     + std::to_string(limits.max_data_bytes)
                     + " (the variables this connection serves)");
  if (head.data_bytes % sizeof(float) != 0)
    return malformed("data of " + std::to_string(head.data_bytes)
                     + " bytes is not a whole number of floats");
  return std::nullopt;
}

// -- meta_writer ------------------------------------------------------------

tensor_refs refs_of(const std::vector<tensor>* tensors) {
  tensor_refs out;
  if (tensors)
    for (auto& t : *tensors)
      out.push_back(&t);
  return out;
}

tensor key_bits(const int64_t* keys, size_t n) {
  static_assert(sizeof(int64_t) == 2 * sizeof(float), "a key is two floats' bits");
  tensor out({static_cast<int64_t>(n), 2});
  if (n > 0)
    std::memcpy(out.data(), keys, n * sizeof(int64_t));
  return out;
}

tensor count_bits(const uint32_t* counts, size_t n) {
  static_assert(sizeof(uint32_t) == sizeof(float), "a count is one float's bits");
  tensor out({static_cast<int64_t>(n)});
  if (n > 0)
    std::memcpy(out.data(), counts, n * sizeof(uint32_t));
  return out;
}

bool keys_of(const tensor& bits, std::vector<int64_t>& out) {
  out.clear();
  if (bits.rank() != 2 || bits.dim(1) != 2)
    return false;
  out.resize(static_cast<size_t>(bits.dim(0)));
  if (!out.empty())
    std::memcpy(out.data(), bits.data(), out.size() * sizeof(int64_t));
  return true;
}

bool counts_of(const tensor& bits, size_t n, std::vector<uint32_t>& out) {
  out.clear();
  if (bits.rank() != 1 || bits.dim(0) != static_cast<int64_t>(n))
    return false;
  out.resize(n);
  if (n > 0)
    std::memcpy(out.data(), bits.data(), n * sizeof(uint32_t));
  return true;
}

meta_writer::meta_writer(const tensor_refs& tensors) {
  auto count = static_cast<uint32_t>(tensors.size());
  raw(&count, sizeof(count));
  for (auto* t : tensors) {
    auto rank = static_cast<uint32_t>(t->rank());
    raw(&rank, sizeof(rank));
    raw(t->shape().data(), rank * sizeof(int64_t));
  }
}

meta_writer& meta_writer::text(std::string_view v) {
  auto n = static_cast<uint32_t>(v.size());
  raw(&n, sizeof(n));
  raw(v.data(), v.size());
  return *this;
}

meta_writer& meta_writer::names(const std::vector<std::string>& v) {
  auto n = static_cast<uint32_t>(v.size());
  raw(&n, sizeof(n));
  for (auto& name : v)
    text(name);
  return *this;
}

// -- meta_reader ------------------------------------------------------------

bool meta_reader::take(void* p, size_t n) {
  // A rank-0 shape asks for nothing, into an empty vector whose data() is null.
  if (n == 0)
    return ok_;
  if (!ok_ || rest_.size() < n) {
    ok_ = false;
    std::memset(p, 0, n);
    return false;
  }
  std::memcpy(p, rest_.data(), n);
  rest_.remove_prefix(n);
  return true;
}

std::string meta_reader::text() {
  uint32_t n = 0;
  if (!take(&n, sizeof(n)) || n > rest_.size()) {
    ok_ = false;
    return {};
  }
  std::string out(rest_.substr(0, n));
  rest_.remove_prefix(n);
  return out;
}

std::vector<std::string> meta_reader::names() {
  uint32_t n = 0;
  // Each name takes at least its 4-byte length: a count beyond that is a lie.
  if (!take(&n, sizeof(n)) || n > rest_.size() / sizeof(uint32_t)) {
    ok_ = false;
    return {};
  }
  std::vector<std::string> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n && ok_; ++i)
    out.push_back(text());
  return ok_ ? out : std::vector<std::string>{};
}

maybe_failure meta_reader::shapes(std::vector<shape_t>& out, uint64_t data_bytes,
                                  const frame_limits& limits) {
  out.clear();
  uint32_t count = 0;
  if (!take(&count, sizeof(count)))
    return malformed("meta section too short for its shape list");
  if (count > max_frame_tensors || count > rest_.size() / sizeof(uint32_t))
    return malformed("claims " + std::to_string(count) + " tensors, more than it can hold");
  uint64_t floats = 0;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t rank = 0;
    if (!take(&rank, sizeof(rank)) || rank > 8)
      return malformed("tensor " + std::to_string(i) + " has no rank or a rank above 8");
    shape_t shape(rank);
    if (!take(shape.data(), rank * sizeof(int64_t)))
      return malformed("tensor " + std::to_string(i) + ": shape cut short");
    // The non-zero dimensions are bounded too: a zero among them makes the
    // tensor empty, but a huge rest would still overflow a shape's count.
    uint64_t product = 1;
    bool empty = false;
    for (auto d : shape) {
      if (d < 0)
        return malformed("tensor " + std::to_string(i) + " has a negative dimension");
      if (d == 0) {
        empty = true;
        continue;
      }
      if (product > limits.max_elements / static_cast<uint64_t>(d))
        return malformed("tensor " + std::to_string(i) + " of shape " + to_string(shape)
                         + " exceeds the limit of " + std::to_string(limits.max_elements)
                         + " elements (the model's largest variable)");
      product *= static_cast<uint64_t>(d);
    }
    floats += empty ? 0 : product;
    out.push_back(std::move(shape));
  }
  if (floats * sizeof(float) != data_bytes)
    return malformed("shapes hold " + std::to_string(floats * sizeof(float))
                     + " bytes of floats but the header announces " + std::to_string(data_bytes));
  return std::nullopt;
}

// -- frame_writer -----------------------------------------------------------

frame_writer::frame_writer(frame_kind kind, uint64_t request, const meta_writer& meta,
                           const tensor_refs& tensors) {
  frame_header head;
  head.kind = static_cast<uint16_t>(kind);
  head.request = request;
  head.meta_bytes = static_cast<uint32_t>(meta.bytes().size());
  for (auto* t : tensors)
    head.data_bytes += t->bytes();
  heads_.reserve(sizeof(head) + meta.bytes().size());
  heads_.append(reinterpret_cast<const char*>(&head), sizeof(head));
  heads_ += meta.bytes();
  head_chunks_.push_back({0, 0, heads_.size()});
  chunks_.push_back({nullptr, heads_.size()}); // the header: see send_some
  for (auto* t : tensors)
    if (t->bytes() > 0)
      chunks_.push_back({const_cast<float*>(t->data()), t->bytes()});
}

void frame_writer::append(frame_writer next) {
  auto base = heads_.size();
  auto first = chunks_.size();
  heads_ += next.heads_;
  for (auto& h : next.head_chunks_)
    head_chunks_.push_back({first + h.chunk, base + h.offset, h.length});
  chunks_.insert(chunks_.end(), next.chunks_.begin(), next.chunks_.end());
}

bool frame_writer::send_some(channel& ch, maybe_failure& error) {
  // The headers' chunks point into heads_: set here, so that a writer
  // copied or moved (a short string's buffer moves with it) sends its own.
  for (auto& h : head_chunks_)
    chunks_[h.chunk] = {heads_.data() + h.offset, h.length};
  while (next_ < chunks_.size()) {
    // At most 64 chunks per call: a frame of many small tensors goes in turns.
    iovec pending[64];
    size_t n = 0;
    for (size_t i = next_; i < chunks_.size() && n < 64; ++i, ++n)
      pending[n] = chunks_[i];
    pending[0].iov_base = static_cast<char*>(pending[0].iov_base) + offset_;
    pending[0].iov_len -= offset_;
    auto sent = ch.write_some(pending, n, error);
    if (sent <= 0)
      return false;
    auto left = static_cast<size_t>(sent);
    while (next_ < chunks_.size() && left >= chunks_[next_].iov_len - offset_) {
      left -= chunks_[next_].iov_len - offset_;
      offset_ = 0;
      ++next_;
    }
    offset_ += left;
  }
  unflushed_ = !ch.flush(error);
  return !unflushed_;
}

// -- frame_reader -----------------------------------------------------------

meta_reader frame_reader::fields() const {
  return meta_reader{std::string_view(meta_).substr(fields_at_)};
}

void frame_reader::next() {
  phase_ = phase::header;
  got_ = 0;
  tensor_ = 0;
}

maybe_failure frame_reader::on_header() {
  if (auto err = check_header(head_, limits_))
    return err;
  meta_.clear(); // filled as its bytes arrive: a header alone allocates nothing
  return std::nullopt;
}

maybe_failure frame_reader::on_meta() {
  meta_reader reader{meta_};
  if (auto err = reader.shapes(shapes_, head_.data_bytes, limits_))
    return err;
  fields_at_ = meta_.size() - reader.remaining();
  return std::nullopt;
}

void frame_reader::read_data() {
  tensors_.resize(shapes_.size());
  for (size_t i = 0; i < shapes_.size(); ++i)
    tensors_[i].resize(std::move(shapes_[i]));
  shapes_.clear();
  phase_ = phase::data;
  got_ = 0;
  tensor_ = 0;
}

void frame_reader::skip_data() {
  shapes_.clear();
  phase_ = phase::skip;
  got_ = 0;
}

bool frame_reader::receive_some(channel& ch, maybe_failure& error) {
  for (;;) {
    auto step = progress::complete; // paused, done
    switch (phase_) {
      case phase::header:
        step = read_header(ch, error);
        break;
      case phase::meta:
        step = read_meta(ch, error);
        break;
      case phase::data:
        step = read_floats(ch, error);
        break;
      case phase::skip:
        step = skip_floats(ch, error);
        break;
      case phase::paused:
      case phase::done:
        break;
    }
    if (step != progress::go_on)
      return step == progress::complete;
  }
}

frame_reader::progress frame_reader::read_header(channel& ch, maybe_failure& error) {
  auto got = ch.read_some(reinterpret_cast<char*>(&head_) + got_, sizeof(head_) - got_, error);
  if (got <= 0)
    return progress::wait;
  got_ += static_cast<size_t>(got);
  if (got_ < sizeof(head_))
    return progress::go_on;
  if ((error = on_header()))
    return progress::wait;
  phase_ = phase::meta;
  got_ = 0;
  return progress::go_on;
}

frame_reader::progress frame_reader::read_meta(channel& ch, maybe_failure& error) {
  if (meta_.size() < head_.meta_bytes) {
    char chunk[16384];
    auto want = std::min<size_t>(sizeof(chunk), head_.meta_bytes - meta_.size());
    auto got = ch.read_some(chunk, want, error);
    if (got <= 0)
      return progress::wait;
    meta_.append(chunk, static_cast<size_t>(got));
    return progress::go_on;
  }
  if ((error = on_meta()))
    return progress::wait;
  if (pause_) {
    phase_ = phase::paused;
    return progress::complete;
  }
  read_data();
  return progress::go_on;
}

frame_reader::progress frame_reader::read_floats(channel& ch, maybe_failure& error) {
  while (tensor_ < tensors_.size() && got_ == tensors_[tensor_].bytes()) {
    ++tensor_;
    got_ = 0;
  }
  if (tensor_ == tensors_.size()) {
    phase_ = phase::done;
    return progress::complete;
  }
  auto& t = tensors_[tensor_];
  auto got = ch.read_some(reinterpret_cast<char*>(t.data()) + got_, t.bytes() - got_, error);
  if (got <= 0)
    return progress::wait;
  got_ += static_cast<size_t>(got);
  return progress::go_on;
}

frame_reader::progress frame_reader::skip_floats(channel& ch, maybe_failure& error) {
  if (got_ == head_.data_bytes) {
    phase_ = phase::done;
    return progress::complete;
  }
  char scratch[1 << 16];
  auto want = std::min<uint64_t>(sizeof(scratch), head_.data_bytes - got_);
  auto got = ch.read_some(scratch, static_cast<size_t>(want), error);
  if (got <= 0)
    return progress::wait;
  got_ += static_cast<size_t>(got);
  return progress::go_on;
}

frame_writer refusal_frame(uint64_t request, const failure& why) {
  meta_writer meta;
  meta.u8(static_cast<uint8_t>(why.code)).text(why.message);
  return frame_writer{frame_kind::refusal, request, meta};
}

std::optional<failure> read_refusal(meta_reader fields) {
  auto code = static_cast<errc>(fields.u8());
  auto message = fields.text();
  if (!fields.at_end() || code <= errc::first_code_ || code >= errc::end_of_codes_)
    return std::nullopt;
  return failure{code, message};
}

} // namespace troupe::bulk
