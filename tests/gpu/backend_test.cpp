#define BOOST_TEST_MODULE gpu_backend
#include <boost/test/unit_test.hpp>

#include "gpu/backend.hpp"
#include "tensor/error.hpp"
#include "tensor/ops.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(device_names_parse) {
  BOOST_TEST((gpu::parse_device("cpu").type == gpu::device_spec::kind::cpu));
  auto d = gpu::parse_device("cuda:3");
  BOOST_TEST((d.type == gpu::device_spec::kind::cuda && d.index == 3));
  BOOST_TEST(d.to_string() == "cuda:3");
  for (auto bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"})
    BOOST_CHECK_THROW(gpu::parse_device(bad), troupe_error);
}

BOOST_AUTO_TEST_CASE(cpu_backend_matches_reference_ops) {
  auto backend = gpu::make_backend(gpu::parse_device("cpu"));
  tensor a({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  tensor b({3, 2}, std::vector<float>{1, 0, 0, 1, 1, 1});
  tensor c, ref;
  backend->matmul(a, b, c, false, false);
  ops::matmul(a, b, ref);
  BOOST_TEST(c.bit_equal(ref));
  tensor bias({2}, std::vector<float>{1, -1});
  backend->add_bias(c, bias);
  BOOST_TEST(c[0] == ref[0] + 1);
  tensor g1, g2;
  double l1 = backend->softmax_cross_entropy(c, {0, 1}, g1);
  double l2 = ops::softmax_cross_entropy(c, {0, 1}, g2);
  BOOST_TEST(l1 == l2);
  BOOST_TEST(g1.bit_equal(g2));
}

// Without a device (CI, development machines) asking for one is a clear
// error, never a crash; with one, the CUDA path must at least be reachable.
BOOST_AUTO_TEST_CASE(cuda_request_without_device_is_a_clear_error) {
  if (gpu::cuda_device_count() > 0) {
    BOOST_TEST_MESSAGE("a CUDA device is present; skipping the no-device check");
    return;
  }
  try {
    gpu::make_backend(gpu::parse_device("cuda:0"));
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    std::string msg = e.what();
    BOOST_TEST((msg.find("cuda:0") != std::string::npos));
  }
}
