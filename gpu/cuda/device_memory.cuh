#pragma once
// Device memory for a GPU worker: a pool that reuses freed blocks of the same
// size (a step after the first allocates nothing) and refuses to grow past the
// share of the device the worker was given (gpu-memory-fraction); and
// page-locked host staging buffers, so that copies run asynchronously.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace troupe::gpu::cuda {

/// "12 MB", rounded up, for messages about memory.
std::string megabytes(size_t bytes);

class device_pool {
public:
  /// limit_bytes: the most this pool holds on the device at once.
  explicit device_pool(size_t limit_bytes);
  ~device_pool();
  device_pool(const device_pool&) = delete;
  device_pool& operator=(const device_pool&) = delete;

  /// A block of at least `bytes`: a free one of up to twice that size, or a
  /// new one; when a new one would pass the limit, the free blocks are given
  /// back to the device first. Throws troupe_error when the live blocks
  /// alone would exceed the limit, naming the sizes and what to change.
  void* acquire(size_t bytes);
  void release(void* block) noexcept;

private:
  void trim() noexcept;

  size_t limit_;
  size_t reserved_ = 0;               // bytes held from the device, live or free
  std::multimap<size_t, void*> free_; // size -> block
  std::map<void*, size_t> size_of_;   // every block held
};

/// A typed device array from a pool; resize keeps the block when it is big
/// enough, so buffers sized by the first step are reused by every later one.
template <class T>
class device_array {
public:
  device_array() = default;
  explicit device_array(device_pool& pool) : pool_(&pool) {}
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  device_array(device_array&& other) noexcept { *this = std::move(other); }
  device_array& operator=(device_array&& other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  ~device_array() {
    if (data_)
      pool_->release(data_);
  }

  void resize(size_t n) {
    if (n > capacity_) {
      if (data_)
        pool_->release(data_);
      data_ = nullptr;
      size_ = capacity_ = 0; // consistent if acquire throws
      data_ = static_cast<T*>(pool_->acquire(n * sizeof(T)));
      capacity_ = n;
    }
    size_ = n;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  size_t bytes() const noexcept { return size_ * sizeof(T); }

private:
  device_pool* pool_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

/// Page-locked host memory that grows when asked for more.
class pinned_buffer {
public:
  pinned_buffer() = default;
  ~pinned_buffer();
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  float* reserve(size_t floats);
  float* data() noexcept { return data_; }

private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

} // namespace troupe::gpu::cuda
