#pragma once
// The join of a fan-out: a request sent to several actors at once, whose
// replies (or errors) arrive one by one in any order. Each arrival calls
// arrive(); the last one runs `done`, exactly once. Handlers keep the
// fan_in alive by capturing the shared_ptr make_fan_in returns.
#include <cstddef>
#include <functional>
#include <memory>

namespace troupe {

class fan_in {
public:
  fan_in(size_t expected, std::function<void()> done)
    : remaining_(expected), done_(std::move(done)) {
    if (remaining_ == 0)
      finish();
  }

  /// One reply (or error) came in.
  void arrive() {
    if (remaining_ > 0 && --remaining_ == 0)
      finish();
  }

  size_t remaining() const noexcept { return remaining_; }

private:
  void finish() {
    auto done = std::move(done_);
    done_ = nullptr;
    if (done)
      done();
  }

  size_t remaining_;
  std::function<void()> done_;
};

/// A fan_in for `expected` replies; with none expected, `done` runs at once.
inline std::shared_ptr<fan_in> make_fan_in(size_t expected, std::function<void()> done) {
  return std::make_shared<fan_in>(expected, std::move(done));
}

} // namespace troupe
