#pragma once
// What the bindings share: tensors as NumPy arrays, and the module's
// functions over files (files.cpp).
#include <cstring>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "tensor/core/tensor.hpp"

namespace troupe::python {

/// A copy of `t` as a float32 array of its shape.
inline pybind11::array_t<float> copy_of(const tensor& t) {
  std::vector<pybind11::ssize_t> shape(t.shape().begin(), t.shape().end());
  pybind11::array_t<float> out(shape);
  std::memcpy(out.mutable_data(), t.data(), t.size() * sizeof(float));
  return out;
}

/// A float32 array of `shape` over `data`, without a copy: valid only as
/// long as `data` is (the step's buffers: until the step is answered).
inline pybind11::array_t<float> view_of(float* data, const shape_t& shape) {
  std::vector<pybind11::ssize_t> extents(shape.begin(), shape.end());
  // A base that owns nothing: NumPy must not free the worker's buffer.
  return pybind11::array_t<float>(extents, data, pybind11::capsule(data, [](void*) {}));
}

/// read_checkpoint and load_data, into module `m`.
void bind_files(pybind11::module_& m);

} // namespace troupe::python
