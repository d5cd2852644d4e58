#include "actors/net/background_exchange.hpp"

#include <sys/socket.h>

namespace troupe {

background_exchange::background_exchange() : thread_([this] { loop(); }) {
}

background_exchange::~background_exchange() {
  cancel();
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void background_exchange::start(std::vector<bulk_link*> links, std::chrono::milliseconds within) {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [this] { return !running_; });
  links_ = std::move(links);
  within_ = within;
  running_ = true;
  lock.unlock();
  changed_.notify_all();
}

void background_exchange::wait() {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [this] { return !running_; });
}

void background_exchange::cancel() {
  std::unique_lock<std::mutex> lock{mutex_};
  // shutdown() wakes the thread's poll on these sockets; the links' state
  // stays the thread's until it reports the run over.
  if (running_)
    for (auto* link : links_)
      ::shutdown(link->fd(), SHUT_RDWR);
  changed_.wait(lock, [this] { return !running_; });
}

void background_exchange::loop() {
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    changed_.wait(lock, [this] { return running_ || stopping_; });
    if (stopping_ && !running_)
      return;
    auto links = links_;
    auto until = std::chrono::steady_clock::now() + within_;
    lock.unlock();
    complete_all(links, until);
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

} // namespace troupe
