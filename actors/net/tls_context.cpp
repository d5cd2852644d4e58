#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "actors/net/channel.hpp"

namespace troupe::bulk {

namespace {

std::string openssl_reason() {
  auto code = ERR_get_error();
  ERR_clear_error();
  if (code == 0)
    return "no reason given";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// The write side of a handshake: OpenSSL's messages go to the end of the
// channel's output buffer (BIO data: that wire_buffer), which flush() sends.
// Null data after the handshake: a stray TLS write fails.
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

// The server's first and only TLS record after the handshake: the client
// reads it through TLS, so a session the server refused (its client
// certificate check failed after the client's side had finished) ends in the
// client's handshake with TLS's own alert, and both ends switch to records
// (record_cipher.hpp) at a known point of the stream.
constexpr char ready_record[] = "troupe records 1";

// One connection's handshake, attempt by attempt on a non-blocking socket:
// TLS's own, then the ready record (the server writes it, the client reads
// it), then whatever of it the socket has not taken yet.
class tls_handshake {
public:
  tls_handshake(SSL* ssl, channel& out, bool server) : ssl_(ssl), out_(out), server_(server) {}

  /// True when done; otherwise the poll events it waits for, or a failure.
  bool step(short& events, maybe_failure& error) {
    ERR_clear_error();
    int ret = 1;
    if (!shaken_) {
      ret = server_ ? SSL_accept(ssl_) : SSL_connect(ssl_);
      shaken_ = ret == 1;
      if (shaken_ && server_) {
        if (SSL_write(ssl_, ready_record, sizeof(ready_record)) <= 0) // into out_: whole
          return refused(error);
        ready_ = true;
      }
    }
    if (shaken_ && !server_ && !ready_) {
      ret = read_ready(error);
      if (error)
        return false;
    }
    bool flushed = out_.flush(error);
    if (error)
      return false;
    if (ready_) {
      events = POLLOUT;
      return flushed;
    }
    switch (SSL_get_error(ssl_, ret)) {
      case SSL_ERROR_WANT_READ:
        events = flushed ? POLLIN : POLLIN | POLLOUT;
        return false;
      case SSL_ERROR_WANT_WRITE:
        events = POLLOUT;
        return false;
      default:
        return refused(error);
    }
  }

private:
  // SSL_read's result for the ready record; `error` set when the peer sent
  // something else.
  int read_ready(maybe_failure& error) {
    char got[sizeof(ready_record) + 1];
    int ret = SSL_read(ssl_, got, sizeof(got));
    if (ret <= 0)
      return ret;
    if (ret != sizeof(ready_record) || std::memcmp(got, ready_record, sizeof(ready_record)) != 0) {
      error = failure{errc::protocol_mismatch,
                      "bulk connection: the TLS peer is no Troupe node of this version"};
      return ret;
    }
    ready_ = true;
    return ret;
  }

  bool refused(maybe_failure& error) const {
    auto verify = SSL_get_verify_result(ssl_);
    error = failure{errc::unauthorized,
                    "bulk connection: TLS handshake failed: "
                      + (verify != X509_V_OK ? std::string(X509_verify_cert_error_string(verify))
                                             : openssl_reason())
                      + " (both sides need a certificate of the cluster CA)"};
    return false;
  }

  SSL* ssl_;
  channel& out_;
  bool server_;
  bool shaken_ = false;
  bool ready_ = false;
};

// Waits for `events` on fd until the deadline; false with `error` set then.
bool wait_until(int fd, short events, deadline until, maybe_failure& error) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    until - std::chrono::steady_clock::now());
  if (left.count() <= 0) {
    error = connection_stopped("no TLS handshake before the deadline");
    return false;
  }
  pollfd p{fd, events, 0};
  if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30))) < 0
      && errno != EINTR) {
    error = connection_stopped(std::string("poll failed: ") + std::strerror(errno));
    return false;
  }
  return true;
}

} // namespace

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

channel tls_context::handshake(socket_fd fd, bool server, deadline until,
                               maybe_failure& error) const {
  std::unique_ptr<SSL, ssl_free> ssl{SSL_new(ctx_)};
  BIO* reads = BIO_new_socket(fd.get(), BIO_NOCLOSE);
  BIO* writes = append_method() ? BIO_new(append_method()) : nullptr;
  if (!ssl || !reads || !writes) {
    BIO_free(reads);
    BIO_free(writes);
    error = connection_stopped("no TLS session: " + openssl_reason());
    return {};
  }
  channel out{std::move(fd)};
  BIO_set_data(writes, &out.out_);
  SSL_set_bio(ssl.get(), reads, writes);
  tls_handshake steps{ssl.get(), out, server};
  short events = 0;
  while (!steps.step(events, error))
    if (error || !wait_until(out.fd(), events, until, error))
      return {};
  // TLS is done with the socket: whatever it read past the ready record
  // would be lost to the records.
  if (SSL_has_pending(ssl.get()) == 1) {
    error = failure{errc::protocol_mismatch,
                    "bulk connection: TLS data after the handshake (another Troupe version?)"};
    return {};
  }
  BIO_set_data(writes, nullptr);
  out.start_records(ssl.release(), server);
  return out;
}

} // namespace troupe::bulk
