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

failure stopped(std::string what) {
  return {errc::training_stopped, "bulk connection: " + std::move(what)};
}

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
    error = stopped(std::string(what) + " failed: " + std::strerror(errno));
    return -1;
  }
}

std::string openssl_reason() {
  auto code = ERR_get_error();
  ERR_clear_error();
  if (code == 0)
    return "no reason given";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// The write side of a TLS channel: OpenSSL's records go straight to the end
// of the channel's output buffer (BIO data: that wire_buffer), which
// flush() sends. A memory BIO would zero its new bytes, copy the record in,
// and copy it out again into that buffer.
int append_write(BIO* bio, const char* data, int n) {
  auto* out = static_cast<wire_buffer*>(BIO_get_data(bio));
  if (!out || n < 0)
    return -1;
  try {
    out->insert(out->end(), data, data + n);
  } catch (const std::bad_alloc&) {
    return -1; // no exception through OpenSSL's C frames: the write fails
  }
  return n;
}

long append_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0; // flush() sends; nothing else applies
}

int append_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* append_method() {
  static BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "troupe channel output");
    if (m) {
      BIO_meth_set_write(m, append_write);
      BIO_meth_set_ctrl(m, append_ctrl);
      BIO_meth_set_create(m, append_create);
    }
    return m;
  }();
  return method;
}

int passphrase_callback(char* buf, int size, int, void* user) {
  auto* pass = static_cast<const std::string*>(user);
  auto n = std::min<int>(size, static_cast<int>(pass->size()));
  std::copy_n(pass->data(), n, buf);
  return n;
}

} // namespace

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

struct channel::records {
  struct ssl_free {
    void operator()(SSL* ssl) const noexcept { SSL_free(ssl); }
  };
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
        error = stopped(std::string("send failed: ") + std::strerror(errno));
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
    error = stopped("closed by the peer");
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
        error = stopped("closed by the peer");
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

// -- tls_context --------------------------------------------------------------

std::shared_ptr<const tls_context> tls_context::make(const tls_files& files, maybe_failure& error) {
  auto fail = [&](const std::string& what) {
    error = failure{errc::invalid_setting,
                    "bulk path TLS: " + what + " (" + openssl_reason() + ")"};
    return nullptr;
  };
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (!ctx)
    return fail("no TLS context");
  std::shared_ptr<const tls_context> out{new tls_context(ctx)};
  // TLS 1.3 only (both ends are Troupe nodes): its exporter keys the
  // records that follow the handshake (record_cipher.hpp). No session
  // tickets: nothing of TLS may follow the handshake's last message but the
  // server's ready record. No read-ahead: OpenSSL must not take bytes past
  // that record off the socket.
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_read_ahead(ctx, 0);
  auto pass = files.passphrase;
  SSL_CTX_set_default_passwd_cb(ctx, passphrase_callback);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, &pass);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate.c_str()) != 1)
    return fail("cannot load the certificate '" + files.certificate + "'");
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail("cannot load the key '" + files.key + "'");
  SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr); // pass goes out of scope
  if (SSL_CTX_check_private_key(ctx) != 1)
    return fail("the key does not belong to the certificate");
  const char* cafile = files.cafile.empty() ? nullptr : files.cafile.c_str();
  const char* capath = files.capath.empty() ? nullptr : files.capath.c_str();
  if (SSL_CTX_load_verify_locations(ctx, cafile, capath) != 1)
    return fail("cannot load the cluster CA");
  // Both sides show a certificate of the cluster CA, as under CAF's openssl
  // module (which checks no host name either: the CA is the cluster).
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

channel tls_context::accept(socket_fd fd, deadline until, maybe_failure& error) const {
  return handshake(std::move(fd), true, until, error);
}

channel tls_context::connect(socket_fd fd, deadline until, maybe_failure& error) const {
  return handshake(std::move(fd), false, until, error);
}

namespace {

// The server's first and only TLS record after the handshake: the client
// reads it through TLS, so a session the server refused (its client
// certificate check failed after the client's side had finished) ends in the
// client's handshake with TLS's own alert, and both ends switch to records
// at a known point of the stream.
constexpr char ready_record[] = "troupe records 1";

} // namespace

channel tls_context::handshake(socket_fd fd, bool server, deadline until,
                               maybe_failure& error) const {
  std::unique_ptr<SSL, channel::records::ssl_free> ssl{SSL_new(ctx_)};
  BIO* reads = BIO_new_socket(fd.get(), BIO_NOCLOSE);
  BIO* writes = append_method() ? BIO_new(append_method()) : nullptr; // flush() sends what it holds
  if (!ssl || !reads || !writes) {
    BIO_free(reads);
    BIO_free(writes);
    error = stopped("no TLS session: " + openssl_reason());
    return {};
  }
  channel out{std::move(fd)};
  BIO_set_data(writes, &out.out_);
  SSL_set_bio(ssl.get(), reads, writes);
  auto refused = [&] {
    auto verify = SSL_get_verify_result(ssl.get());
    error = failure{errc::unauthorized,
                    "bulk connection: TLS handshake failed: "
                      + (verify != X509_V_OK ? std::string(X509_verify_cert_error_string(verify))
                                             : openssl_reason())
                      + " (both sides need a certificate of the cluster CA)"};
    return channel{};
  };
  bool shaken = false, ready = false;
  for (;;) {
    ERR_clear_error();
    int ret = 1;
    if (!shaken) {
      ret = server ? SSL_accept(ssl.get()) : SSL_connect(ssl.get());
      shaken = ret == 1;
      if (shaken && server) {
        if (SSL_write(ssl.get(), ready_record, sizeof(ready_record)) <= 0) // into out_: whole
          return refused();
        ready = true;
      }
    }
    if (shaken && !server && !ready) {
      char got[sizeof(ready_record) + 1];
      ret = SSL_read(ssl.get(), got, sizeof(got));
      if (ret > 0) {
        if (ret != sizeof(ready_record) || std::memcmp(got, ready_record, sizeof(got) - 1) != 0) {
          error = failure{errc::protocol_mismatch,
                          "bulk connection: the TLS peer is no Troupe node of this version"};
          return {};
        }
        ready = true;
      }
    }
    maybe_failure sent;
    bool flushed = out.flush(sent);
    if (sent) {
      error = sent;
      return {};
    }
    if (ready && flushed)
      break;
    short events = POLLOUT;
    if (!ready) {
      switch (SSL_get_error(ssl.get(), ret)) {
        case SSL_ERROR_WANT_READ:
          events = flushed ? POLLIN : POLLIN | POLLOUT;
          break;
        case SSL_ERROR_WANT_WRITE:
          events = POLLOUT;
          break;
        default:
          return refused();
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error = stopped("no TLS handshake before the deadline");
      return {};
    }
    pollfd p{out.fd(), events, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30))) < 0
        && errno != EINTR) {
      error = stopped(std::string("poll failed: ") + std::strerror(errno));
      return {};
    }
  }
  // TLS is done with the socket: whatever it read past the ready record
  // would be lost to the records.
  if (SSL_has_pending(ssl.get()) == 1) {
    error = failure{errc::protocol_mismatch,
                    "bulk connection: TLS data after the handshake (another Troupe version?)"};
    return {};
  }
  BIO_set_data(SSL_get_wbio(ssl.get()), nullptr); // a stray TLS write fails, not out_
  out.records_ = std::make_unique<channel::records>(std::move(ssl), server);
  return out;
}

} // namespace troupe::bulk
