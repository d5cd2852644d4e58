#pragma once
// The bulk path's sockets: an owned file descriptor, listening and
// connecting over TCP (non-blocking, TCP_NODELAY), and driving a frame to
// completion on one socket within a deadline. Free of CAF.
#include <chrono>
#include <cstdint>
#include <string>

#include "actors/bulk/frame.hpp"

namespace troupe::bulk {

using deadline = std::chrono::steady_clock::time_point;

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

/// A listening socket on host:port (port 0: any free port, reported in
/// `port`); a failure naming the address when it cannot.
socket_fd listen_on(const std::string& host, uint16_t& port, maybe_failure& error);

/// A connected, non-blocking socket to host:port, or a failure within the deadline.
socket_fd connect_to(const std::string& host, uint16_t port, deadline until, maybe_failure& error);

/// Makes an accepted socket non-blocking, with TCP_NODELAY.
void prepare(int fd);

/// Waits until fd is readable (or writable) or the deadline passes; false
/// with `error` set on the deadline or a poll failure.
bool wait_for(int fd, bool writable, deadline until, maybe_failure& error);

/// Sends the whole frame before the deadline.
maybe_failure send_frame(int fd, frame_writer& frame, deadline until);

/// Receives one whole frame before the deadline.
maybe_failure receive_frame(int fd, frame_reader& frame, deadline until);

} // namespace troupe::bulk
