// What each GPU thread computes (gpu/cuda/element_math.hpp), run on the CPU
// over every index and composed the way the CUDA layers (gpu/cuda/*_layer*.cu)
// compose the kernels, with a plain column-major GEMM in cuBLAS's place,
// against the CPU layers. This checks the CUDA backend's index arithmetic,
// pooling windows, dropout stream and GEMM argument mapping on machines
// without a GPU.
#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "gpu/cuda/element_math.hpp"
#include "tensor/nn/layers.hpp"
#include "tensor/nn/loss.hpp"
#include "tests/support/tensors.hpp"

using namespace troupe;
using namespace troupe::testing;
namespace el = troupe::gpu::element;

namespace {

// cuBLAS's sgemm semantics, plainly: column-major, C = op(A) op(B) + beta C.
void column_major_sgemm(const el::column_major_gemm& g, float* c, float beta) {
  for (int j = 0; j < g.cols; ++j)
    for (int i = 0; i < g.rows; ++i) {
      double sum = 0;
      for (int l = 0; l < g.inner; ++l) {
        float a = g.transpose_first ? g.first[l + i * g.first_ld] : g.first[i + l * g.first_ld];
        float b = g.transpose_second ? g.second[j + l * g.second_ld]
                                     : g.second[l + j * g.second_ld];
        sum += double(a) * b;
      }
      c[i + j * g.c_ld] = static_cast<float>(sum + (beta != 0 ? beta * c[i + j * g.c_ld] : 0.0));
    }
}

// The model's gemm(): row-major C[m x n] = op(A) op(B) + beta C.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
          float* c, float beta = 0) {
  column_major_sgemm(el::row_major_gemm(ta, tb, m, n, k, a, b), c, beta);
}

std::vector<float> column_sums(const float* dy, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      out[j] += dy[r * cols + j];
  return out;
}

el::geometry32 geometry(const shape_t& in, const shape_t& out, int64_t kh, int64_t kw,
                        int64_t stride, padding pad, int64_t batch) {
  return {int(batch),
          int(in[0]),
          int(in[1]),
          int(in[2]),
          int(kh),
          int(kw),
          int(stride),
          int(pad_before(in[0], kh, stride, pad)),
          int(pad_before(in[1], kw, stride, pad)),
          int(out[0]),
          int(out[1])};
}

struct layer_out {
  tensor y, dx;
  std::vector<tensor> grads;
};

layer_out run_cpu(layer& l, const tensor& x, const std::vector<tensor>& params, const tensor& dy) {
  layer_out o;
  l.forward(x, o.y, params.data(), true);
  o.grads.resize(params.size());
  l.backward(x, o.y, dy, &o.dx, params.data(), o.grads.data());
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(element_math)

BOOST_AUTO_TEST_CASE(dense_through_the_gemm_mapping) {
  const int64_t batch = 5, in = 7, units = 3;
  auto l = make_dense("fc", units, {}, {});
  l->configure({in});
  std::vector<tensor> p{random_tensor({in, units}, 1), random_tensor({units}, 2)};
  auto x = random_tensor({batch, in}, 3), dy = random_tensor({batch, units}, 4);
  auto cpu = run_cpu(*l, x, p, dy);
  std::vector<float> y(batch * units), dw(in * units), dx(batch * in);
  gemm(false, false, batch, units, in, x.data(), p[0].data(), y.data());
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t j = 0; j < units; ++j)
      y[r * units + j] += p[1][j];
  gemm(true, false, in, units, batch, x.data(), dy.data(), dw.data());
  auto db = column_sums(dy.data(), batch, units);
  gemm(false, true, batch, in, units, dy.data(), p[0].data(), dx.data());
  BOOST_TEST(relative_error(y.data(), cpu.y) < 1e-6);
  BOOST_TEST(relative_error(dw.data(), cpu.grads[0]) < 1e-6);
  BOOST_TEST(relative_error(db.data(), cpu.grads[1]) < 1e-6);
  BOOST_TEST(relative_error(dx.data(), cpu.dx) < 1e-6);
}

BOOST_AUTO_TEST_CASE(convolution_as_the_kernels_compose_it) {
  struct c {
    int64_t h, w, ch, filters, k, stride;
    padding pad;
    int64_t batch, chunk;
  };
  for (auto p :
       {c{5, 5, 2, 3, 3, 1, padding::same, 3, 3}, c{6, 5, 2, 2, 3, 1, padding::valid, 3, 2},
        c{7, 7, 1, 2, 3, 2, padding::same, 2, 1}, c{7, 6, 2, 2, 2, 2, padding::valid, 3, 2},
        c{8, 8, 3, 4, 5, 1, padding::same, 3, 1}, c{9, 9, 1, 8, 5, 2, padding::same, 2, 2},
        c{6, 6, 8, 3, 5, 1, padding::same, 3, 2}, c{7, 6, 4, 2, 3, 2, padding::valid, 2, 1}}) {
    auto l = make_conv2d("conv", p.filters, p.k, p.k, p.stride, p.pad, {}, {});
    auto out = l->configure({p.h, p.w, p.ch});
    std::vector<tensor> params{random_tensor({p.k, p.k, p.ch, p.filters}, 5),
                               random_tensor({p.filters}, 6)};
    auto x = random_tensor({p.batch, p.h, p.w, p.ch}, 7);
    auto dy = random_tensor({p.batch, out[0], out[1], out[2]}, 8);
    auto cpu = run_cpu(*l, x, params, dy);
    auto g = geometry({p.h, p.w, p.ch}, out, p.k, p.k, p.stride, p.pad, p.batch);
    int64_t k = p.k * p.k * p.ch, per_out = out[0] * out[1];
    std::vector<float> y(p.batch * per_out * p.filters), dw(k * p.filters),
      dx(p.batch * p.h * p.w * p.ch), col;
    // Forward and backward chunk by chunk, as gpu/cuda/conv2d_layer.cu does,
    // unfolding runs of 4 channels at once where the channels allow.
    auto unfold = [&](int64_t first, int64_t rows) {
      if (p.ch % 4 == 0)
        for (int i = 0; i < rows * k / 4; ++i)
          el::im2col<4>(i, x.data(), col.data(), g, int(first));
      else
        for (int i = 0; i < rows * k; ++i)
          el::im2col<1>(i, x.data(), col.data(), g, int(first));
    };
    for (int64_t first = 0; first < p.batch; first += p.chunk) {
      auto count = std::min(p.chunk, p.batch - first);
      auto rows = count * per_out;
      col.assign(rows * k, -1.0f);
      unfold(first, rows);
      gemm(false, false, rows, p.filters, k, col.data(), params[0].data(),
           y.data() + first * per_out * p.filters);
    }
    for (size_t i = 0; i < y.size(); ++i)
      y[i] += params[1][i % p.filters];
    auto db = column_sums(dy.data(), p.batch * per_out, p.filters);
    for (int64_t first = 0; first < p.batch; first += p.chunk) {
      auto count = std::min(p.chunk, p.batch - first);
      auto rows = count * per_out;
      const float* dy_chunk = dy.data() + first * per_out * p.filters;
      col.assign(rows * k, -1.0f);
      unfold(first, rows);
      gemm(true, false, k, p.filters, rows, col.data(), dy_chunk, dw.data(),
           first == 0 ? 0.0f : 1.0f);
      gemm(false, true, rows, k, p.filters, dy_chunk, params[0].data(), col.data());
      if (p.ch % 4 == 0)
        for (int i = 0; i < count * p.h * p.w * p.ch / 4; ++i)
          el::col2im<4>(i, col.data(), dx.data(), g, int(first));
      else
        for (int i = 0; i < count * p.h * p.w * p.ch; ++i)
          el::col2im<1>(i, col.data(), dx.data(), g, int(first));
    }
    auto what = l->describe() + " batch " + std::to_string(p.batch) + " chunk "
                + std::to_string(p.chunk);
    BOOST_TEST(relative_error(y.data(), cpu.y) < 1e-5, what);
    BOOST_TEST(relative_error(dw.data(), cpu.grads[0]) < 1e-5, what);
    BOOST_TEST(relative_error(db.data(), cpu.grads[1]) < 1e-5, what);
    BOOST_TEST(relative_error(dx.data(), cpu.dx) < 1e-5, what);
  }
}

BOOST_AUTO_TEST_CASE(max_pool_windows_and_the_folded_relu) {
  struct c {
    int64_t h, w, ch, size, stride;
    padding pad;
    bool relu;
  };
  for (auto p : {c{5, 5, 3, 2, 2, padding::same, false}, c{5, 5, 3, 2, 2, padding::valid, false},
                 c{7, 6, 2, 3, 2, padding::same, false}, c{7, 6, 2, 3, 2, padding::valid, true},
                 c{8, 8, 10, 2, 2, padding::same, true}, c{6, 6, 1, 3, 1, padding::same, false}}) {
    auto l = make_max_pool("pool", p.size, p.stride, p.pad);
    auto out = l->configure({p.h, p.w, p.ch});
    if (p.relu)
      BOOST_REQUIRE(l->fuse_input_relu());
    const int64_t batch = 3;
    auto x = random_tensor({batch, p.h, p.w, p.ch}, 9);
    auto dy = random_tensor({batch, out[0], out[1], out[2]}, 10);
    auto cpu = run_cpu(*l, x, {}, dy);
    auto g = geometry({p.h, p.w, p.ch}, out, p.size, p.size, p.stride, p.pad, batch);
    std::vector<float> y(cpu.y.size()), dx(x.size());
    std::vector<int32_t> argmax(cpu.y.size());
    for (int o = 0; o < int(y.size()); ++o)
      el::max_pool_forward(o, x.data(), y.data(), argmax.data(), g, p.relu);
    for (int i = 0; i < int(dx.size()); ++i)
      el::max_pool_backward(i, dy.data(), argmax.data(), dx.data(), g);
    auto what = l->describe() + (p.relu ? " with ReLU" : "");
    BOOST_TEST(relative_error(y.data(), cpu.y) == 0.0, what);
    BOOST_TEST(relative_error(dx.data(), cpu.dx) < 1e-7, what); // same sums, overlapping windows
  }
}

BOOST_AUTO_TEST_CASE(dropout_draws_the_cpu_stream) {
  for (float rate : {0.5f, 0.2f}) {
    const uint64_t seed = 77;
    auto l = make_dropout("dropout", rate, seed);
    l->configure({1023});
    auto x = random_tensor({3, 1023}, 11, 0.5f, 1.0f); // no zeros: the mask shows in y
    auto keep_below = shared::dropout_keep_below(rate);
    float scale = 1.0f / (1.0f - rate);
    uint64_t counter = seed; // the GPU layer starts where the CPU layer does
    for (int step = 0; step < 2; ++step) {
      tensor y;
      l->forward(x, y, nullptr, true);
      size_t mismatches = 0;
      for (size_t i = 0; i < x.size(); ++i)
        // What dropout_kernel computes for thread i.
        if (x[i]
              * shared::dropout_mask(shared::dropout_draw(counter, i / 2),
                                     static_cast<unsigned>(i % 2), keep_below, scale)
            != y[i])
          ++mismatches;
      BOOST_TEST(mismatches == 0u, "rate " << rate << " step " << step);
      counter = shared::dropout_advance(counter, x.size()); // as cuda_model advances it
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_rows_and_relu) {
  const int64_t rows = 6, classes = 10;
  auto logits = random_tensor({rows, classes}, 12, -4.0f, 4.0f);
  std::vector<int32_t> labels{0, 3, 9, 2, 2, 7};
  tensor cpu_grad;
  auto cpu = softmax_cross_entropy(logits, labels, &cpu_grad);
  // What softmax_xent_kernel computes for thread r: the same row, in float.
  std::vector<float> grad(rows * classes);
  double sum = 0;
  size_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool hit = false;
    sum += shared::softmax_xent_row<float>(logits.data() + r * classes, classes, labels[r],
                                           1.0f / rows, grad.data() + r * classes, &hit);
    hits += hit;
  }
  BOOST_TEST(std::fabs(sum / rows - cpu.loss) < 1e-5 * std::fabs(cpu.loss));
  BOOST_TEST(hits == cpu.correct);
  BOOST_TEST(relative_error(grad.data(), cpu_grad) < 1e-5);
  BOOST_TEST(std::isnan(el::relu(std::nanf("")))); // as the CPU's max keeps it
  BOOST_TEST(el::relu(-2.0f) == 0.0f);
  BOOST_TEST(el::relu(3.0f) == 3.0f);
}

BOOST_AUTO_TEST_SUITE_END()
