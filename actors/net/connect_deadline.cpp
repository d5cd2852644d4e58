#include "actors/net/connect_deadline.hpp"
#include "actors/net/next_symbol.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

namespace {

std::atomic<int> deadline_ms{0};

using connect_fn = int (*)(int, const sockaddr*, socklen_t);

connect_fn libc_connect() {
  static auto fn = troupe::next_symbol<connect_fn>("connect", "libc");
  return fn;
}

bool blocking_tcp(int fd, const sockaddr* addr, int& flags) {
  if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
    return false;
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return false;
  flags = fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) == 0;
}

// The outcome (0 or an errno) of a non-blocking connect in progress.
int wait_connected(int fd, int limit_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  until - std::chrono::steady_clock::now())
                  .count();
    pollfd p{fd, POLLOUT, 0};
    int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return ETIMEDOUT;
    int error = 0;
    socklen_t len = sizeof(error);
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 ? error : errno;
  }
}

} // namespace

// Exported even where the build hides symbols by default: libcaf_io must
// bind to it.
extern "C" __attribute__((visibility("default"))) int connect(int fd, const sockaddr* addr,
                                                              socklen_t len) {
  int limit = deadline_ms.load(std::memory_order_relaxed);
  int flags = 0;
  if (limit <= 0 || !blocking_tcp(fd, addr, flags) || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return libc_connect()(fd, addr, len);
  int error = libc_connect()(fd, addr, len) == 0 ? 0 : errno;
  if (error == EINPROGRESS)
    error = wait_connected(fd, limit);
  fcntl(fd, F_SETFL, flags);
  if (error == 0)
    return 0;
  errno = error;
  return -1;
}

namespace troupe {

void set_connect_deadline(std::chrono::milliseconds limit) {
  deadline_ms.store(static_cast<int>(limit.count()), std::memory_order_relaxed);
}

std::string connect_deadline_problem() {
  if (dlsym(RTLD_DEFAULT, "connect") != reinterpret_cast<void*>(&connect))
    return "libc's connect is not the one with a deadline; link "
           "actors/net/connect_deadline.cpp into the executable";
  return {};
}

} // namespace troupe
