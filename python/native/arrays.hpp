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

/// read_checkpoint and load_data, into module `m`.
void bind_files(pybind11::module_& m);

} // namespace troupe::python
