// cuBLAS is opened on first use, not at start (gpu/cuda/cublas_on_demand.cpp):
// a process that never computes on a GPU never maps it, and the first call
// reaches the real library. Built only where nvcc was found.
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>
#include <cublas_v2.h>

namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(library) != std::string::npos)
      return true;
  return false;
}

} // namespace

BOOST_AUTO_TEST_SUITE(device_interface)

BOOST_AUTO_TEST_CASE(cublas_is_loaded_on_first_use_only) {
  BOOST_TEST(!mapped("libcublas"), "cuBLAS was loaded at start");
  BOOST_TEST(!mapped("libcublasLt"));
  // A call that needs no device: answered by the real library.
  BOOST_TEST(std::string(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED))
             == "CUBLAS_STATUS_NOT_SUPPORTED");
  BOOST_TEST(mapped("libcublas"));
}

BOOST_AUTO_TEST_SUITE_END()
