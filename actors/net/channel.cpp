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
// of the channel's output buffer (BIO data: that std::vector<char>), which
// flush() sends. A memory BIO would zero its new bytes, copy the record in,
// and copy it out again into that buffer.
int append_write(BIO* bio, const char* data, int n) {
  auto* out = static_cast<std::vector<char>*>(BIO_get_data(bio));
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

channel::channel(socket_fd fd, SSL* ssl) : fd_(std::move(fd)), ssl_(ssl) {
  bind_output();
}

channel::channel(channel&& other) noexcept
  : fd_(std::move(other.fd_)), ssl_(other.ssl_), want_(other.want_), out_(std::move(other.out_)),
    out_at_(other.out_at_), staged_(std::move(other.staged_)) {
  other.ssl_ = nullptr;
  bind_output();
}

void channel::bind_output() noexcept {
  if (ssl_)
    BIO_set_data(SSL_get_wbio(ssl_), &out_);
}

channel& channel::operator=(channel&& other) noexcept {
  if (this != &other) {
    if (ssl_)
      SSL_free(ssl_);
    fd_ = std::move(other.fd_);
    ssl_ = other.ssl_;
    want_ = other.want_;
    out_ = std::move(other.out_);
    out_at_ = other.out_at_;
    staged_ = std::move(other.staged_);
    other.ssl_ = nullptr;
    bind_output();
  }
  return *this;
}

bool channel::flush(maybe_failure& error) {
  if (!ssl_)
    return true;
  while (out_at_ < out_.size()) {
    auto sent = socket_call(
      [&] { return ::send(fd_.get(), out_.data() + out_at_, out_.size() - out_at_, MSG_NOSIGNAL); },
      "send", error);
    if (!sent) {
      want_ = POLLOUT;
      return false;
    }
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

channel::~channel() {
  if (ssl_)
    SSL_free(ssl_); // no close_notify: the peer sees the connection close either way
}

ssize_t channel::tls_result(int ret, maybe_failure& error, bool writing) {
  if (ret > 0) {
    want_ = 0;
    return ret;
  }
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      want_ = POLLIN;
      return 0;
    case SSL_ERROR_WANT_WRITE:
      want_ = POLLOUT;
      return 0;
    case SSL_ERROR_ZERO_RETURN:
      error = stopped("closed by the peer");
      return -1;
    case SSL_ERROR_SYSCALL:
      error = ret == 0 || errno == 0 ? stopped("closed by the peer")
                                     : stopped(std::string(writing ? "send" : "receive")
                                               + " failed: " + std::strerror(errno));
      ERR_clear_error();
      return -1;
    default:
      error = stopped(std::string("TLS ") + (writing ? "write" : "read")
                      + " failed: " + openssl_reason());
      return -1;
  }
}

ssize_t channel::read_some(void* into, size_t n, maybe_failure& error) {
  if (ssl_) {
    ERR_clear_error();
    auto got = tls_result(SSL_read(ssl_, into, static_cast<int>(std::min<size_t>(n, 1 << 30))),
                          error, false);
    // A read may have to answer (a key update, an alert): send it.
    if (got >= 0 && !flush(error))
      return error ? -1 : got;
    return got;
  }
  auto got = socket_call([&] { return ::recv(fd_.get(), into, n, 0); }, "receive", error);
  if (!got)
    return 0;
  if (*got == 0) {
    error = stopped("closed by the peer");
    return -1;
  }
  return *got;
}

bool channel::seal(const char* from, size_t n, maybe_failure& error) {
  // Partial writes are on, so SSL_write seals one record a call; the output
  // buffer takes every record, so it never stops short.
  while (n > 0) {
    ERR_clear_error();
    auto wrote = tls_result(SSL_write(ssl_, from, static_cast<int>(std::min<size_t>(n, 1 << 30))),
                            error, true);
    if (wrote <= 0) {
      if (!error)
        error = stopped("TLS write stopped short of its output buffer");
      return false;
    }
    from += wrote;
    n -= static_cast<size_t>(wrote);
  }
  return true;
}

ssize_t channel::write_some(const iovec* chunks, size_t count, maybe_failure& error) {
  if (ssl_) {
    // The records of up to 256 KiB of chunks go to the output buffer, then
    // to the socket in one call: a small frame's header, values and tail are
    // one system call, as in the clear. What the socket does not take now
    // waits in out_ (flush).
    if (!flush(error))
      return error ? -1 : 0;
    // A frame's header and small tensors share a record with what follows
    // (each record costs a seal here and an open at the peer beside its
    // bytes): chunks are cut into whole 16 KiB records, and what is left of
    // one waits in staged_ for the next chunk or the end of the call.
    constexpr size_t batch = size_t{256} << 10;
    constexpr size_t record = size_t{16} << 10; // TLS's largest
    size_t taken = 0;
    for (size_t i = 0; i < count && taken < batch; ++i) {
      auto* from = static_cast<const char*>(chunks[i].iov_base);
      size_t left = std::min(chunks[i].iov_len, batch - taken);
      taken += left;
      if (!staged_.empty()) {
        size_t top = std::min(left, record - staged_.size());
        staged_.insert(staged_.end(), from, from + top);
        from += top;
        left -= top;
        if (staged_.size() < record)
          continue;
        if (!seal(staged_.data(), staged_.size(), error))
          return -1;
        staged_.clear();
      }
      size_t whole = left - left % record;
      if (whole > 0 && !seal(from, whole, error))
        return -1;
      staged_.insert(staged_.end(), from + whole, from + left);
    }
    if (!staged_.empty()) {
      if (!seal(staged_.data(), staged_.size(), error))
        return -1;
      staged_.clear();
    }
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
  if (ssl_ && out_at_ < out_.size())
    return POLLOUT;
  if (ssl_ && want_ != 0)
    return want_;
  return writing ? POLLOUT : POLLIN;
}

bool channel::has_buffered() const noexcept {
  if (!ssl_)
    return false;
  if (SSL_pending(ssl_) > 0)
    return true; // decrypted, waiting
  // Records read ahead but not yet decrypted count too (poll would not see
  // them), unless the last read found only part of a record there: then the
  // rest must come first, and poll says when.
  return SSL_has_pending(ssl_) == 1 && want_ != POLLIN;
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
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Whole records per read call, not a header and then a body, and up to
  // 256 KiB of them: a frame costs a system call or two, as in the clear.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, size_t{256} << 10);
  // AES-128-GCM first: as safe for a cluster's traffic, and cheaper per byte.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                "TLS_CHACHA20_POLY1305_SHA256");
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

channel tls_context::handshake(socket_fd fd, bool server, deadline until,
                               maybe_failure& error) const {
  SSL* ssl = SSL_new(ctx_);
  BIO* reads = BIO_new_socket(fd.get(), BIO_NOCLOSE);
  BIO* writes = append_method() ? BIO_new(append_method()) : nullptr; // flush() sends what it holds
  if (!ssl || !reads || !writes) {
    if (ssl)
      SSL_free(ssl);
    BIO_free(reads);
    BIO_free(writes);
    error = stopped("no TLS session: " + openssl_reason());
    return {};
  }
  SSL_set_bio(ssl, reads, writes);
  channel out{std::move(fd), ssl}; // frees the session on every return
  for (;;) {
    ERR_clear_error();
    int ret = server ? SSL_accept(ssl) : SSL_connect(ssl);
    maybe_failure sent;
    bool flushed = out.flush(sent);
    if (sent) {
      error = sent;
      return {};
    }
    if (ret == 1 && flushed)
      return out;
    short events = POLLOUT;
    switch (ret == 1 ? SSL_ERROR_WANT_WRITE : SSL_get_error(ssl, ret)) {
      case SSL_ERROR_WANT_READ:
        events = flushed ? POLLIN : POLLIN | POLLOUT;
        break;
      case SSL_ERROR_WANT_WRITE:
        events = POLLOUT;
        break;
      default: {
        auto verify = SSL_get_verify_result(ssl);
        error = failure{errc::unauthorized,
                        "bulk connection: TLS handshake failed: "
                          + (verify != X509_V_OK
                               ? std::string(X509_verify_cert_error_string(verify))
                               : openssl_reason())
                          + " (both sides need a certificate of the cluster CA)"};
        return {};
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
}

} // namespace troupe::bulk
