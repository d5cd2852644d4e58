#include "gpu/cuda/device_memory.cuh"

#include "gpu/cuda/check.cuh"

namespace troupe::gpu::cuda {

std::string megabytes(size_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MB";
}

device_pool::device_pool(size_t limit_bytes) : limit_(limit_bytes) {
}

device_pool::~device_pool() {
  for (auto& [block, bytes] : size_of_)
    cudaFree(block); // no throw from a destructor; a failure here changes nothing
}

void device_pool::trim() noexcept {
  for (auto& [bytes, block] : free_) {
    cudaFree(block);
    size_of_.erase(block);
    reserved_ -= bytes;
  }
  free_.clear();
}

void* device_pool::acquire(size_t bytes) {
  bytes = (bytes + 255) & ~size_t{255}; // keep blocks aligned for vector loads
  auto it = free_.lower_bound(bytes);
  if (it != free_.end() && it->first <= 2 * bytes) {
    void* p = it->second;
    free_.erase(it);
    return p;
  }
  if (reserved_ + bytes > limit_)
    trim();
  if (reserved_ + bytes > limit_)
    throw troupe_error("GPU memory: this worker needs more than its " + megabytes(limit_)
                       + " (train.gpu-memory-fraction of the device; " + megabytes(reserved_)
                       + " in use, " + megabytes(bytes)
                       + " more asked); raise train.gpu-memory-fraction or lower the batch size");
  void* p = nullptr;
  auto status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError(); // not sticky; clear it for the calls after
    // The share was free when the worker started (check_memory_share), but
    // the pool grows lazily: other workers or processes took it since.
    throw troupe_error("GPU memory: the device has no " + megabytes(bytes)
                       + " free for this worker (" + megabytes(reserved_) + " of its "
                       + megabytes(limit_)
                       + " share in use): other workers or processes on the device hold the rest;"
                         " make the train.gpu-memory-fraction of everything on it add up to less"
                         " than 1, or lower the batch size");
  }
  TROUPE_CUDA_CHECK(status);
  size_of_[p] = bytes;
  reserved_ += bytes;
  return p;
}

void device_pool::release(void* block) noexcept {
  auto it = size_of_.find(block);
  if (it != size_of_.end())
    free_.emplace(it->second, block);
}

pinned_buffer::~pinned_buffer() {
  if (data_)
    cudaFreeHost(data_);
}

float* pinned_buffer::reserve(size_t floats) {
  if (floats > capacity_) {
    if (data_)
      TROUPE_CUDA_CHECK(cudaFreeHost(data_));
    data_ = nullptr;
    capacity_ = 0;
    TROUPE_CUDA_CHECK(cudaMallocHost(&data_, floats * sizeof(float)));
    capacity_ = floats;
  }
  return data_;
}

} // namespace troupe::gpu::cuda
