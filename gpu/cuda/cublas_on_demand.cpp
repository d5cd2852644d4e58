// cuBLAS, loaded when a worker first computes on a GPU. Linked, cuBLAS and
// cuBLASLt cost every troupe-node process ~140 MiB of resident memory at
// start (their static data), a ps shard and the chief included, which never
// touch a GPU (docs/results.md, "Memory"). These definitions take the place
// of the six cuBLAS entry points gpu/cuda calls: the first call opens the
// library (the toolkit's, where the build found it, else by its soname on
// the library path) and every call forwards to it. Only the nvcc build
// compiles this file; the emulated backend has its own cuBLAS.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

namespace {

struct opened {
  void* handle = nullptr;
  std::string error; // why it could not be opened
};

const opened& library() {
  static const opened lib = [] {
    opened out;
    out.handle = ::dlopen(TROUPE_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!out.handle)
      out.handle = ::dlopen(TROUPE_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!out.handle)
      out.error = std::string("cuBLAS could not be loaded: ") + ::dlerror();
    return out;
  }();
  return lib;
}

// The library's own definition of `name`, of the type of our stand-in.
template <class Function>
Function* entry(Function*, const char* name) {
  void* h = library().handle;
  return h ? reinterpret_cast<Function*>(::dlsym(h, name)) : nullptr;
}

#define TROUPE_CUBLAS_CALL(name, ...)                                                              \
  static auto* real = entry(&name, #name);                                                         \
  return real ? real(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

} // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  TROUPE_CUBLAS_CALL(cublasCreate_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  TROUPE_CUBLAS_CALL(cublasDestroy_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  TROUPE_CUBLAS_CALL(cublasSetStream_v2, handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m,
                                           int n, const float* alpha, const float* A, int lda,
                                           const float* x, int incx, const float* beta, float* y,
                                           int incy) {
  TROUPE_CUBLAS_CALL(cublasSgemv_v2, handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy);
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C,
                                           int ldc) {
  TROUPE_CUBLAS_CALL(cublasSgemm_v2, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                     C, ldc);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static auto* real = entry(&cublasGetStatusName, "cublasGetStatusName");
  if (real)
    return real(status);
  return library().error.empty() ? "cuBLAS lacks cublasGetStatusName" : library().error.c_str();
}

} // extern "C"
