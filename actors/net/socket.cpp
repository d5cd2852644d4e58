#include "actors/net/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace troupe::bulk {

namespace {

// The first IPv4 or IPv6 address of host.
bool resolve(const std::string& host, uint16_t port, sockaddr_storage& out, socklen_t& len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || !found)
    return false;
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  len = found->ai_addrlen;
  ::freeaddrinfo(found);
  return true;
}

} // namespace

void prepare(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

socket_fd accept_next(const socket_fd& listener, std::chrono::milliseconds wait) {
  pollfd p{listener.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0)
    return {};
  socket_fd fd{::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC)};
  if (fd)
    prepare(fd.get());
  return fd;
}

channel accept_channel(const socket_fd& accepted, const tls_context* tls, deadline until,
                       maybe_failure& error) {
  socket_fd second{::fcntl(accepted.get(), F_DUPFD_CLOEXEC, 0)};
  if (!second) {
    error = connection_stopped(std::string("cannot duplicate the socket: ") + std::strerror(errno));
    return {};
  }
  return tls ? tls->accept(std::move(second), until, error) : channel{std::move(second)};
}

channel connect_channel(const std::string& host, uint16_t port, const tls_context* tls,
                        deadline until, maybe_failure& error) {
  auto fd = connect_to(host, port, until, error);
  if (!fd)
    return {};
  return tls ? tls->connect(std::move(fd), until, error) : channel{std::move(fd)};
}

channel open_ticketed(const std::string& host, uint16_t port, const tls_context* tls,
                      const hello_fields& hello, deadline until, int32_t& welcomed,
                      maybe_failure& error) {
  auto ch = connect_channel(host, port, tls, until, error);
  if (!ch)
    return {};
  meta_writer meta;
  meta.u64(hello.run).u64(hello.ticket).text(hello.label);
  frame_writer out{frame_kind::hello, 0, meta};
  frame_reader in{frame_limits{0, 0, max_hello_meta_bytes}};
  if ((error = send_frame(ch, out, until)) || (error = receive_frame(ch, in, until)))
    return {};
  auto fields = in.fields();
  auto kind = static_cast<frame_kind>(in.header().kind);
  if (kind == frame_kind::refusal) {
    auto why = read_refusal(fields);
    error = why ? *why : failure{errc::invalid_request, host + ": a malformed refusal of a hello"};
    return {};
  }
  welcomed = fields.i32();
  if (kind != frame_kind::welcome || !fields.at_end() || in.header().request != 0) {
    error = failure{errc::invalid_request, host + " answered a hello with a malformed frame (kind "
                                             + std::to_string(in.header().kind) + ")"};
    return {};
  }
  return ch;
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = "?";
  char port[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

socket_fd listen_on(const std::string& host, uint16_t& port, maybe_failure& error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!resolve(host, port, addr, len)) {
    error = failure{errc::invalid_setting, "bulk path: cannot resolve '" + host + "'"};
    return {};
  }
  socket_fd fd{::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0
      || ::listen(fd.get(), 64) != 0) {
    error = failure{errc::invalid_setting, "bulk path: cannot listen on " + host + ":"
                                             + std::to_string(port) + ": " + std::strerror(errno)};
    return {};
  }
  len = sizeof(addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

socket_fd connect_to(const std::string& host, uint16_t port, deadline until, maybe_failure& error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!resolve(host, port, addr, len)) {
    error = connection_stopped("cannot resolve '" + host + "'");
    return {};
  }
  socket_fd fd{::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (!fd) {
    error = connection_stopped(std::string("no socket: ") + std::strerror(errno));
    return {};
  }
  prepare(fd.get());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) {
      error = connection_stopped("cannot connect to " + host + ":" + std::to_string(port) + ": "
                                 + std::strerror(errno));
      return {};
    }
    pollfd p{fd.get(), POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0
        || ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30))) <= 0) {
      error = connection_stopped("cannot connect to " + host + ":" + std::to_string(port)
                                 + " before the deadline");
      return {};
    }
    int status = 0;
    socklen_t size = sizeof(status);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &status, &size);
    if (status != 0) {
      error = connection_stopped("cannot connect to " + host + ":" + std::to_string(port) + ": "
                                 + std::strerror(status));
      return {};
    }
  }
  return fd;
}

bool chief_is_reading(const std::string& host, uint16_t port, deadline until) {
  maybe_failure error;
  auto fd = connect_to(host, port, until, error);
  if (!fd)
    return false;
  std::string said;
  char buffer[64];
  const std::string_view greeting = chief_lobby_greeting;
  while (said.size() < greeting.size()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    pollfd p{fd.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      return false;
    auto got = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (got <= 0)
      return false;
    said.append(buffer, static_cast<size_t>(got));
  }
  return said.compare(0, greeting.size(), greeting) == 0;
}

bool wait_for(const channel& ch, bool writable, deadline until, maybe_failure& error) {
  if (!writable && ch.has_buffered())
    return true;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error = connection_stopped("no progress before the deadline");
      return false;
    }
    pollfd p{ch.fd(), ch.wanted(writable), 0};
    auto ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (ready > 0)
      return true;
    if (ready < 0 && errno != EINTR) {
      error = connection_stopped(std::string("poll failed: ") + std::strerror(errno));
      return false;
    }
  }
}

namespace {

// Calls step(error) until it returns true, waiting (up to `until`) for the
// socket to take (`writing`) or give more in between.
template <class Step>
maybe_failure until_done(channel& ch, bool writing, deadline until, Step step) {
  maybe_failure error;
  while (!step(error)) {
    if (error || !wait_for(ch, writing, until, error))
      return error;
  }
  return std::nullopt;
}

} // namespace

maybe_failure send_frame(channel& ch, frame_writer& frame, deadline until) {
  return until_done(ch, true, until,
                    [&](maybe_failure& error) { return frame.send_some(ch, error); });
}

maybe_failure receive_frame(channel& ch, frame_reader& frame, deadline until) {
  return until_done(ch, false, until,
                    [&](maybe_failure& error) { return frame.receive_some(ch, error); });
}

} // namespace troupe::bulk
