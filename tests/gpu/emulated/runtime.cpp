// The emulated CUDA runtime, cuBLAS and scheduler (see tests/gpu/emulated/README.md).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <Eigen/Core>

#include "cublas_v2.h"
#include "cuda_runtime.h"

namespace troupe_emulation {

struct operation {
  std::function<void()> work; // empty for a wait
  stream* wait_for = nullptr; // a wait: until that stream has done wait_until operations
  uint64_t wait_until = 0;
};

struct stream {
  std::deque<operation> queue;
  uint64_t issued = 0, done = 0;
  bool destroyed = false;
};

struct event {
  stream* recorded_on = nullptr; // null: never recorded, complete
  uint64_t position = 0;
};

namespace {

constexpr size_t device_bytes = size_t{80} << 30; // an H100's worth, never all allocated

struct emulator {
  // Streams live as long as the process: events may still name a destroyed one.
  std::vector<std::unique_ptr<stream>> streams;
  std::map<const char*, size_t> device_blocks, pinned_blocks; // start -> bytes
  std::map<char*, size_t> device_pages; // device block -> its mapping (whole pages)
  int device_open = 0; // > 0 while device work runs: only then is device memory accessible
  size_t device_used = 0;
  int devices = 1;
  bool newest_first = false;

  emulator() {
    if (const char* n = std::getenv("TROUPE_EMULATED_CUDA_DEVICES"))
      devices = std::atoi(n);
    if (const char* s = std::getenv("TROUPE_EMULATED_SCHEDULE")) {
      std::string schedule = s;
      if (schedule == "newest-first")
        newest_first = true;
      else if (schedule != "oldest-first")
        misuse("TROUPE_EMULATED_SCHEDULE must be oldest-first or newest-first");
    }
  }

  // Held by others, as far as cudaMemGetInfo tells: by default a CUDA
  // context's share, so that, as on a real device, not all of it is free.
  // Read at every call: a test may fill the device while a model lives.
  static size_t busy() {
    const char* mb = std::getenv("TROUPE_EMULATED_CUDA_BUSY_MB");
    size_t bytes = mb ? static_cast<size_t>(std::atoll(mb)) << 20 : size_t{512} << 20;
    return std::min(device_bytes, bytes);
  }

  static bool inside(const std::map<const char*, size_t>& blocks, const void* p, size_t bytes) {
    auto c = static_cast<const char*>(p);
    auto it = blocks.upper_bound(c);
    if (it == blocks.begin())
      return false;
    --it;
    return c + bytes <= it->first + it->second;
  }

  static bool ready(const operation& op) {
    return !op.wait_for || op.wait_for->done >= op.wait_until;
  }

  // Runs queued operations until `finished` holds: one at a time, from the
  // first stream (in the chosen priority) whose next operation may run. A
  // stream lower in priority runs only when the others wait or are empty, so
  // work the code did not make wait for it runs before it.
  template <class Predicate>
  void run_until(Predicate finished) {
    bool opened = false; // device memory, for the operations this call runs
    while (!finished()) {
      stream* pick = nullptr;
      auto consider = [&](stream* s) {
        if (!pick && !s->queue.empty() && ready(s->queue.front()))
          pick = s;
      };
      if (newest_first)
        for (auto it = streams.rbegin(); it != streams.rend(); ++it)
          consider(it->get());
      else
        for (auto& s : streams)
          consider(s.get());
      if (!pick)
        misuse("no stream can progress: every queued operation waits for another");
      operation op = std::move(pick->queue.front());
      pick->queue.pop_front();
      if (op.work) {
        if (!opened)
          open_device();
        opened = true;
        op.work();
      }
      ++pick->done;
    }
    if (opened)
      close_device();
  }

  // Device memory is mapped without access while host code runs, so a host
  // read or write of a device pointer faults (as it would on a GPU) instead
  // of passing here.
  void set_device_access(bool open) {
    for (auto& [start, bytes] : device_pages)
      mprotect(start, bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  }
  void open_device() {
    if (device_open++ == 0)
      set_device_access(true);
  }
  void close_device() {
    if (--device_open == 0)
      set_device_access(false);
  }

  void run_all() {
    run_until([&] {
      return std::all_of(streams.begin(), streams.end(), [](auto& s) { return s->queue.empty(); });
    });
  }

  void push(stream* s, operation op) {
    s->queue.push_back(std::move(op));
    ++s->issued;
  }
};

emulator& emu();

// Names a fault on device memory before the process dies of it.
void on_fault(int signal, siginfo_t* info, void*) {
  static const char message[] = "emulated CUDA: the host touched device memory\n";
  auto* address = static_cast<char*>(info->si_addr);
  for (auto& [start, bytes] : emu().device_pages)
    if (address >= start && address < start + bytes) {
      (void)!write(2, message, sizeof message - 1);
      break;
    }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

emulator& emu() {
  static emulator instance;
  static bool handler = [] {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, nullptr);
    return true;
  }();
  (void)handler;
  return instance;
}

stream* checked(cudaStream_t s) {
  if (s && s->destroyed)
    misuse("work queued on a destroyed stream");
  return s;
}

void* allocate_filled(size_t bytes) {
  size_t rounded = std::max<size_t>(256, (bytes + 255) & ~size_t{255});
  void* p = std::aligned_alloc(256, rounded);
  if (p)
    std::memset(p, 0xFF, rounded); // NaN floats: a read of unwritten memory shows
  return p;
}

// Device memory: whole pages of its own, filled like the rest, and closed to
// the host unless device work is running.
void* map_device(size_t bytes) {
  auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t mapped = std::max(page, (bytes + page - 1) / page * page);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
  std::memset(p, 0xFF, mapped);
  auto& e = emu();
  e.device_pages[static_cast<char*>(p)] = mapped;
  if (e.device_open == 0)
    mprotect(p, mapped, PROT_NONE);
  return p;
}

} // namespace

void enqueue(cudaStream_t s, std::function<void()> work) {
  if (!checked(s)) { // the default stream: at once
    emu().open_device();
    work();
    emu().close_device();
    return;
  }
  emu().push(s, {std::move(work), nullptr, 0});
}

bool on_device(const void* p, size_t bytes) {
  return emulator::inside(emu().device_blocks, p, bytes);
}

void misuse(const char* what) {
  std::fprintf(stderr, "emulated CUDA: %s\n", what);
  std::abort();
}

// The text `names` gives `code`, or `unknown`: what the libraries' name
// and error-string functions answer.
template <typename Code>
const char* name_of(Code code, std::initializer_list<std::pair<Code, const char*>> names,
                    const char* unknown) {
  for (auto& [c, name] : names)
    if (c == code)
      return name;
  return unknown;
}

} // namespace troupe_emulation

using troupe_emulation::emu;
using troupe_emulation::misuse;
using troupe_emulation::name_of;
using troupe_emulation::on_device;

const char* cudaGetErrorString(cudaError_t error) {
  return name_of(error,
                 {{cudaSuccess, "no error"},
                  {cudaErrorInvalidValue, "invalid argument"},
                  {cudaErrorMemoryAllocation, "out of memory"},
                  {cudaErrorInvalidDevice, "invalid device ordinal"}},
                 "unknown error");
}

cudaError_t cudaGetLastError() {
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emu().devices;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device >= 0 && device < emu().devices ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int device) {
  if (cudaSetDevice(device) != cudaSuccess)
    return cudaErrorInvalidDevice;
  std::snprintf(props->name, sizeof props->name, "emulated CUDA device (CPU)");
  props->totalGlobalMem = troupe_emulation::device_bytes;
  props->major = 9;
  props->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  *total = troupe_emulation::device_bytes;
  *free = *total - std::min(*total, emu().device_used + troupe_emulation::emulator::busy());
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  auto& e = emu();
  auto taken = e.device_used + troupe_emulation::emulator::busy();
  if (taken + bytes > troupe_emulation::device_bytes)
    return cudaErrorMemoryAllocation;
  void* p = troupe_emulation::map_device(bytes);
  if (!p)
    return cudaErrorMemoryAllocation;
  e.device_blocks[static_cast<const char*>(p)] = bytes;
  e.device_used += bytes;
  *pointer = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  auto& e = emu();
  e.run_all(); // cudaFree synchronises the device
  auto it = e.device_blocks.find(static_cast<const char*>(pointer));
  if (it == e.device_blocks.end())
    return cudaErrorInvalidValue;
  e.device_used -= it->second;
  e.device_blocks.erase(it);
  auto pages = e.device_pages.find(static_cast<char*>(pointer));
  munmap(pages->first, pages->second);
  e.device_pages.erase(pages);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  void* p = troupe_emulation::allocate_filled(bytes);
  if (!p)
    return cudaErrorMemoryAllocation;
  emu().pinned_blocks[static_cast<const char*>(p)] = bytes;
  *pointer = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* pointer) {
  auto& e = emu();
  e.run_all();
  if (!e.pinned_blocks.erase(static_cast<const char*>(pointer)))
    return cudaErrorInvalidValue;
  std::free(pointer);
  return cudaSuccess;
}

namespace {

// The direction must match where the pointers are, as it must on a device.
cudaError_t check_direction(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  bool dst_device = on_device(dst, bytes), src_device = on_device(src, bytes);
  bool ok = (kind == cudaMemcpyHostToDevice && dst_device && !src_device)
            || (kind == cudaMemcpyDeviceToHost && !dst_device && src_device)
            || (kind == cudaMemcpyDeviceToDevice && dst_device && src_device)
            || (kind == cudaMemcpyHostToHost && !dst_device && !src_device);
  return ok || bytes == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

} // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  // Ordered on the legacy default stream only: work on non-blocking streams
  // is not waited for, so a read after a kernel needs a synchronisation first.
  if (auto status = check_direction(dst, src, bytes, kind); status != cudaSuccess)
    return status;
  emu().open_device();
  std::memcpy(dst, src, bytes);
  emu().close_device();
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (auto status = check_direction(dst, src, bytes, kind); status != cudaSuccess)
    return status;
  auto& e = emu();
  auto pinned = [&](const void* p) {
    if (troupe_emulation::emulator::inside(e.pinned_blocks, p, bytes))
      return true;
    if (bytes > 0 && troupe_emulation::emulator::inside(e.pinned_blocks, p, 1))
      misuse("cudaMemcpyAsync: a host range runs past the end of its pinned allocation");
    return false;
  };
  bool pageable_src = kind == cudaMemcpyHostToDevice && !pinned(src);
  bool pageable_dst = kind == cudaMemcpyDeviceToHost && !pinned(dst);
  // The host data as it was at the call: from pageable memory the driver
  // stages it before returning; from pinned memory the DMA reads it later,
  // so a host write in between is a race a real device may lose.
  std::shared_ptr<std::vector<char>> at_call;
  if (kind == cudaMemcpyHostToDevice)
    at_call = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                  static_cast<const char*>(src) + bytes);
  if (pageable_src) {
    troupe_emulation::enqueue(stream, [=] { std::memcpy(dst, at_call->data(), bytes); });
    return cudaSuccess;
  }
  troupe_emulation::enqueue(stream, [=] {
    if (at_call && std::memcmp(src, at_call->data(), bytes) != 0)
      misuse("cudaMemcpyAsync: the host wrote pinned memory that a queued copy still reads");
    std::memcpy(dst, src, bytes);
  });
  if (pageable_dst && stream) {
    // Into pageable memory the call returns once the copy has happened.
    auto position = stream->issued;
    e.run_until([=] { return stream->done >= position; });
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  auto& e = emu();
  e.streams.push_back(std::make_unique<troupe_emulation::stream>());
  *stream = e.streams.back().get();
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  auto& e = emu();
  e.run_until([=] { return stream->queue.empty(); }); // queued work still completes
  stream->destroyed = true;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream)
    emu().run_until([=] { return stream->queue.empty(); });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  // Waits for the event's most recent record as of this call.
  if (event->recorded_on && troupe_emulation::checked(stream))
    emu().push(stream, {{}, event->recorded_on, event->position});
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new troupe_emulation::event;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!troupe_emulation::checked(stream)) {
    event->recorded_on = nullptr;
    return cudaSuccess;
  }
  event->recorded_on = stream;
  event->position = stream->issued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (auto* s = event->recorded_on) {
    auto position = event->position;
    emu().run_until([=] { return s->done >= position; });
  }
  return cudaSuccess;
}

// cuBLAS

struct cublasContext {
  cudaStream_t stream = nullptr;
};

const char* cublasGetStatusName(cublasStatus_t status) {
  return name_of(status,
                 {{CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS"},
                  {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED"},
                  {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE"}},
                 "CUBLAS_STATUS_UNKNOWN");
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using const_view = Eigen::Map<const matrix, 0, Eigen::OuterStride<>>;
using view = Eigen::Map<matrix, 0, Eigen::OuterStride<>>;

} // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* a, int lda, const float* b, int ldb, const float* beta,
                           float* c, int ldc) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  // cuBLAS's own argument checks; A is stored m x k (or k x m transposed).
  int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows)
      || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0)
    return CUBLAS_STATUS_SUCCESS;
  auto extent = [](int rows, int cols, int ld) {
    return (static_cast<size_t>(cols - 1) * ld + rows) * sizeof(float);
  };
  if ((k > 0
       && (!on_device(a, extent(a_rows, a_cols, lda))
           || !on_device(b, extent(b_rows, b_cols, ldb))))
      || !on_device(c, extent(m, n, ldc)))
    misuse("cublasSgemm: a matrix reaches outside its device allocation");
  float al = *alpha, be = *beta; // host pointer mode: read at the call
  troupe_emulation::enqueue(handle->stream, [=] {
    const_view A(a, a_rows, a_cols, Eigen::OuterStride<>(lda));
    const_view B(b, b_rows, b_cols, Eigen::OuterStride<>(ldb));
    view C(c, m, n, Eigen::OuterStride<>(ldc));
    matrix product;
    if (k == 0)
      product = matrix::Zero(m, n);
    else if (transa == CUBLAS_OP_N && transb == CUBLAS_OP_N)
      product = A * B;
    else if (transa == CUBLAS_OP_N)
      product = A * B.transpose();
    else if (transb == CUBLAS_OP_N)
      product = A.transpose() * B;
    else
      product = A.transpose() * B.transpose();
    // beta = 0: C is written, never read (it may hold NaN), as cuBLAS does.
    if (be == 0.0f)
      C = al * product;
    else
      C = al * product + be * C;
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                           const float* alpha, const float* a, int lda, const float* x, int incx,
                           const float* beta, float* y, int incy) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || lda < std::max(1, m) || incx == 0 || incy == 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (incx != 1 || incy != 1)
    misuse("cublasSgemv: only unit strides are emulated");
  if (m == 0 || n == 0)
    return CUBLAS_STATUS_SUCCESS;
  int x_size = trans == CUBLAS_OP_N ? n : m, y_size = trans == CUBLAS_OP_N ? m : n;
  if (!on_device(a, (static_cast<size_t>(n - 1) * lda + m) * sizeof(float))
      || !on_device(x, x_size * sizeof(float)) || !on_device(y, y_size * sizeof(float)))
    misuse("cublasSgemv: an operand reaches outside its device allocation");
  float al = *alpha, be = *beta;
  troupe_emulation::enqueue(handle->stream, [=] {
    const_view A(a, m, n, Eigen::OuterStride<>(lda));
    Eigen::Map<const Eigen::VectorXf> X(x, x_size);
    Eigen::Map<Eigen::VectorXf> Y(y, y_size);
    Eigen::VectorXf product = trans == CUBLAS_OP_N ? Eigen::VectorXf(A * X)
                                                   : Eigen::VectorXf(A.transpose() * X);
    if (be == 0.0f)
      Y = al * product;
    else
      Y = al * product + be * Y;
  });
  return CUBLAS_STATUS_SUCCESS;
}
