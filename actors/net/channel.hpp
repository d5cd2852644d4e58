#pragma once
// A bulk connection's byte stream: a connected non-blocking socket, plain
// or under mutual TLS (the cluster's certificates, the peer checked against
// the cluster CA, as CAF's openssl module checks BASP peers; after the TLS
// 1.3 handshake, frames go in records of record_cipher.hpp). Frames are read
// and written through it, the same either way. Free of CAF.
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "actors/net/wire_buffer.hpp"
#include "tensor/core/error.hpp"

typedef struct ssl_ctx_st SSL_CTX;

typedef struct ssl_st SSL;

namespace troupe::bulk {

/// A bulk connection that cannot go on: training_stopped, with the message
/// "bulk connection: " + what.
failure connection_stopped(std::string what);

/// Frees an OpenSSL session (a unique_ptr's deleter).
struct ssl_free {
  void operator()(SSL* ssl) const noexcept;
};

using deadline = std::chrono::steady_clock::time_point;

/// The deadline `d` from now.
inline deadline after(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

/// Owns a socket; closes it when destroyed.
class socket_fd {
public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_(fd) {}
  socket_fd(socket_fd&& other) noexcept : fd_(other.release()) {}
  socket_fd& operator=(socket_fd&& other) noexcept;
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

private:
  int fd_ = -1;
};

class channel {
public:
  channel();
  /// Plain TCP.
  explicit channel(socket_fd fd);
  channel(channel&& other) noexcept;
  channel& operator=(channel&& other) noexcept;
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  ~channel();

  int fd() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  bool encrypted() const noexcept { return records_ != nullptr; }

  /// >0: bytes read; 0: nothing now (would block); -1: closed or failed,
  /// with `error` set.
  ssize_t read_some(void* into, size_t n, maybe_failure& error);
  /// Bytes of the chunks taken (in order): >0, 0 (would block) or -1.
  /// Under TLS, bytes taken may still wait in the channel: flush() sends them.
  ssize_t write_some(const iovec* chunks, size_t count, maybe_failure& error);
  /// Sends what write_some took and the socket has not yet; true once all
  /// is out (always, in the clear).
  bool flush(maybe_failure& error);
  /// The poll events the channel waits for after a call that would block.
  short wanted(bool writing) const noexcept;
  /// Bytes received and decrypted, or a whole record, waiting in the
  /// channel: a read needs no poll first.
  bool has_buffered() const noexcept;
  /// Wakes a thread polling this channel's socket (both directions).
  void shutdown() noexcept;

private:
  friend class tls_context;
  struct records; // under TLS: the session and both directions' ciphers (record_cipher)
  /// After a TLS handshake (tls_context): frames go in records from now on,
  /// keyed from `session`, which the channel then owns.
  void start_records(SSL* session, bool server);
  ssize_t read_records(void* into, size_t n, maybe_failure& error);
  socket_fd fd_;
  std::unique_ptr<records> records_;
  wire_buffer out_; // sealed records (or handshake bytes) the socket did not take yet
  size_t out_at_ = 0;
};

/// What a node's mutual TLS is made of: the [openssl] section's files,
/// expanded for this task.
struct tls_files {
  std::string certificate;
  std::string key;
  std::string passphrase;
  std::string cafile;
  std::string capath;
};

/// One process's TLS settings for its bulk connections, both ways.
class tls_context {
public:
  /// The context, or a failure naming the file that did not load.
  static std::shared_ptr<const tls_context> make(const tls_files& files, maybe_failure& error);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// The handshake on an accepted (or connected) non-blocking socket,
  /// within the deadline; a failure when the peer shows no certificate of
  /// the cluster CA, speaks no TLS or is too slow.
  channel accept(socket_fd fd, deadline until, maybe_failure& error) const;
  channel connect(socket_fd fd, deadline until, maybe_failure& error) const;

private:
  explicit tls_context(SSL_CTX* ctx) : ctx_(ctx) {}
  channel handshake(socket_fd fd, bool server, deadline until, maybe_failure& error) const;
  SSL_CTX* ctx_;
};

} // namespace troupe::bulk
