#pragma once
// The buffer a bulk connection's outgoing bytes wait in. Free of CAF.
#include <memory>
#include <utility>
#include <vector>

namespace troupe::bulk {

/// Leaves new elements uninitialised: a buffer grown to take a record is
/// written whole by the cipher, so zeroing it first is a wasted pass.
template <class T>
struct default_init_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = default_init_allocator<U>;
  };
  template <class U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};

/// Bytes on their way to the socket (sealed records, handshake messages).
using wire_buffer = std::vector<char, default_init_allocator<char>>;

} // namespace troupe::bulk
