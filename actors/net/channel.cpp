#include "actors/net/channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <optional>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "actors/net/record_cipher.hpp"

namespace troupe::bulk {

namespace {

// call() (a send or a receive on a non-blocking socket), again when a signal
// interrupted it: its result (>= 0); nullopt when the socket would block; -1
// with `error` naming `what` when it failed.
template <class Call>
std::optional<ssize_t> socket_call(Call call, const char* what, maybe_failure& error) {
  for (;;) {
    auto n = call();
    if (n >= 0)
      return n;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return std::nullopt;
    error = connection_stopped(std::string(what) + " failed: " + std::strerror(errno));
    return -1;
  }
}

} // namespace

failure connection_stopped(std::string what) {
  return {errc::training_stopped, "bulk connection: " + std::move(what)};
}

// -- socket_fd ----------------------------------------------------------------

socket_fd& socket_fd::operator=(socket_fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int socket_fd::release() noexcept {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void socket_fd::reset() noexcept {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

// -- channel ------------------------------------------------------------------

void ssl_free::operator()(SSL* ssl) const noexcept {
  SSL_free(ssl);
}

struct channel::records {
  std::unique_ptr<SSL, ssl_free> session; // kept: each key generation is exported from it
  record_cipher sealer;
  record_cipher opener;
  // Received bytes: [opened_at, opened_end) decrypted and not yet read,
  // [begin, end) not yet opened. Sized for the largest record.
  wire_buffer in;
  size_t opened_at = 0, opened_end = 0, begin = 0, end = 0;

  records(std::unique_ptr<SSL, ssl_free> ssl, bool server)
    : session(std::move(ssl)), sealer(true, exported(session.get(), !server)),
      opener(false, exported(session.get(), server)) {}

  // The keys of one direction (client to server or back), generation by
  // generation, from the session's exporter: both ends derive the same.
  static record_cipher::key_source exported(SSL* ssl, bool client_to_server) {
    return [ssl, client_to_server](uint64_t generation, unsigned char* key_and_iv) {
      constexpr size_t one = record_cipher::key_bytes + record_cipher::iv_bytes;
      static const char label[] = "EXPORTER-troupe-bulk-records";
      unsigned char context[8];
      for (int i = 0; i < 8; ++i)
        context[i] = static_cast<unsigned char>(generation >> (8 * (7 - i)));
      unsigned char both[2 * one];
      bool ok = SSL_export_keying_material(ssl, both, sizeof(both), label, sizeof(label) - 1,
                                           context, sizeof(context), 1)
                == 1;
      if (ok)
        std::memcpy(key_and_iv, both + (client_to_server ? 0 : one), one);
      OPENSSL_cleanse(both, sizeof(both));
      return ok;
    };
  }

  // A whole record waits between begin and end.
  bool whole_record() const noexcept {
    if (end - begin < record_cipher::header_bytes)
      return false;
    maybe_failure ignored;
    auto payload = record_cipher::payload_length(in.data() + begin, ignored);
    // A bad header counts as whole: the next read reports it.
    return !payload
           || end - begin >= record_cipher::header_bytes + *payload + record_cipher::tag_bytes;
  }
};

void channel::start_records(SSL* session, bool server) {
  records_ = std::make_unique<records>(std::unique_ptr<SSL, ssl_free>(session), server);
}

channel::channel() = default;
channel::channel(socket_fd fd) : fd_(std::move(fd)) {
}
channel::channel(channel&&) noexcept = default;
channel& channel::operator=(channel&&) noexcept = default;
channel::~channel() = default; // no close_notify: the peer sees the connection close either way

bool channel::flush(maybe_failure& error) {
  while (out_at_ < out_.size()) {
    auto sent = socket_call(
      [&] { return ::send(fd_.get(), out_.data() + out_at_, out_.size() - out_at_, MSG_NOSIGNAL); },
      "send", error);
    if (!sent)
      return false;
    if (*sent <= 0) {
      if (!error)
        error = connection_stopped(std::string("send failed: ") + std::strerror(errno));
      return false;
    }
    out_at_ += static_cast<size_t>(*sent);
  }
  out_.clear(); // keeps its capacity for the next records
  out_at_ = 0;
  return true;
}

ssize_t channel::read_some(void* into, size_t n, maybe_failure& error) {
  if (records_)
    return read_records(into, n, error);
  auto got = socket_call([&] { return ::recv(fd_.get(), into, n, 0); }, "receive", error);
  if (!got)
    return 0;
  if (*got == 0) {
    error = connection_stopped("closed by the peer");
    return -1;
  }
  return *got;
}

ssize_t channel::read_records(void* into, size_t n, maybe_failure& error) {
  auto& r = *records_;
  constexpr size_t overhead = record_cipher::header_bytes + record_cipher::tag_bytes;
  for (;;) {
    if (r.opened_at < r.opened_end) {
      size_t take = std::min(n, r.opened_end - r.opened_at);
      std::memcpy(into, r.in.data() + r.opened_at, take);
      r.opened_at += take;
      return static_cast<ssize_t>(take);
    }
    size_t whole = record_cipher::header_bytes; // what the next record needs here, at least
    if (r.end - r.begin >= record_cipher::header_bytes) {
      auto payload = record_cipher::payload_length(r.in.data() + r.begin, error);
      if (!payload)
        return -1;
      whole = *payload + overhead;
      if (r.end - r.begin >= whole) {
        // A record the reader takes whole (a tensor: the writer seals each
        // large one apart) is decrypted straight into its destination.
        bool direct = *payload <= n;
        if (!r.opener.open(r.in.data() + r.begin, *payload,
                           direct ? static_cast<char*>(into) : nullptr, error))
          return -1;
        if (direct) {
          r.begin += whole;
          return static_cast<ssize_t>(*payload);
        }
        r.opened_at = r.begin + record_cipher::header_bytes;
        r.opened_end = r.opened_at + *payload;
        r.begin += whole;
        continue;
      }
    }
    // Room for the rest of the record: what is left of it moves to the
    // front (all before it has been read).
    if (r.in.empty())
      r.in.resize(record_cipher::max_payload + overhead);
    if (r.begin == r.end) {
      r.begin = r.end = 0;
    } else if (r.in.size() - r.begin < whole) {
      std::memmove(r.in.data(), r.in.data() + r.begin, r.end - r.begin);
      r.end -= r.begin;
      r.begin = 0;
    }
    r.opened_at = r.opened_end = 0;
    auto got = socket_call(
      [&] { return ::recv(fd_.get(), r.in.data() + r.end, r.in.size() - r.end, 0); }, "receive",
      error);
    if (!got)
      return 0;
    if (*got <= 0) {
      if (!error)
        error = connection_stopped("closed by the peer");
      return -1;
    }
    r.end += static_cast<size_t>(*got);
  }
}

ssize_t channel::write_some(const iovec* chunks, size_t count, maybe_failure& error) {
  if (records_) {
    // Up to 256 KiB of chunks become records in the output buffer, then go
    // to the socket in one call, as in the clear. Small chunks (a frame's
    // header) share a record; a large one (a tensor) has records of its
    // own, which the reader decrypts straight into the tensor. What the
    // socket does not take now waits in out_ (flush).
    if (!flush(error))
      return error ? -1 : 0;
    constexpr size_t own_records = 4096;
    auto& sealer = records_->sealer;
    size_t taken = 0, gathered = 0, first = 0;
    auto seal_gathered = [&](size_t end) {
      bool ok = gathered == 0 || sealer.seal(chunks + first, end - first, gathered, out_, error);
      gathered = 0;
      return ok;
    };
    size_t i = 0;
    for (; i < count && taken < record_cipher::max_payload; ++i) {
      size_t len = std::min(chunks[i].iov_len, record_cipher::max_payload - taken);
      if (len >= own_records) {
        if (!seal_gathered(i) || !sealer.seal(chunks + i, 1, len, out_, error))
          return -1;
      } else if (len > 0) {
        if (gathered == 0)
          first = i;
        gathered += len;
      }
      taken += len;
    }
    if (!seal_gathered(i))
      return -1;
    if (taken == 0)
      return 0;
    if (!flush(error) && error)
      return -1;
    return static_cast<ssize_t>(taken);
  }
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(chunks);
  msg.msg_iovlen = count;
  auto sent = socket_call([&] { return ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL); }, "send", error);
  return sent ? *sent : 0;
}

short channel::wanted(bool writing) const noexcept {
  if (out_at_ < out_.size())
    return POLLOUT;
  return writing ? POLLOUT : POLLIN;
}

bool channel::has_buffered() const noexcept {
  return records_ && (records_->opened_at < records_->opened_end || records_->whole_record());
}

void channel::shutdown() noexcept {
  if (fd_)
    ::shutdown(fd_.get(), SHUT_RDWR);
}

} // namespace troupe::bulk
