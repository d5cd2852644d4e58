#pragma once
// An httplib task queue that serves connections newest first: a request
// that arrives behind a heap of silent connections (each held until the
// read timeout) is served as soon as a thread is free, instead of after all
// of them. The metrics port and troupe-serve use it.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace troupe::http {

class newest_first_pool : public httplib::TaskQueue {
public:
  explicit newest_first_pool(size_t threads) {
    for (size_t i = 0; i < threads; ++i)
      threads_.emplace_back([this] { serve(); });
  }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      waiting_.push_back(std::move(fn));
    }
    wake_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      t.join();
  }

private:
  void serve() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> guard{mutex_};
        wake_.wait(guard, [this] { return stopping_ || !waiting_.empty(); });
        // Stopping: connections not yet served are left to the process's end
        // (serving each would wait out its read timeout).
        if (stopping_)
          return;
        fn = std::move(waiting_.back());
        waiting_.pop_back();
      }
      fn();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> waiting_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

} // namespace troupe::http
