#include "apps/node/chief_lobby.hpp"

#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/socket.hpp"

namespace troupe::node {

chief_lobby::chief_lobby(const host_port& address) {
  uint16_t port = address.port;
  maybe_failure error;
  auto fd = bulk::listen_on(address.host, port, error);
  if (!fd)
    return;
  fd_ = fd.release();
  thread_ = std::thread([this] { accept_until_closed(); });
}

chief_lobby::~chief_lobby() {
  close();
}

void chief_lobby::close() {
  if (fd_ < 0)
    return;
  closing_ = true;
  thread_.join();
  ::close(fd_);
  fd_ = -1;
}

void chief_lobby::accept_until_closed() {
  while (!closing_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    int peer = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (peer < 0)
      continue;
    // Not ready: a ps task reads why and waits on, a worker retries.
    [[maybe_unused]] auto sent = ::send(peer, bulk::chief_lobby_greeting,
                                        std::strlen(bulk::chief_lobby_greeting), MSG_NOSIGNAL);
    ::close(peer);
  }
}

} // namespace troupe::node
