#pragma once
// thrust::make_transform_iterator, emulated for tests (see tests/gpu/emulated/README.md):
// enough for the emulated cub::DeviceReduce, which reads it by index.
#include <cstddef>

namespace thrust {

template <class Iterator, class Function>
struct transform_iterator {
  Iterator base;
  Function function;
  auto operator[](std::ptrdiff_t i) const { return function(base[i]); }
};

template <class Iterator, class Function>
transform_iterator<Iterator, Function> make_transform_iterator(Iterator base, Function f) {
  return {base, f};
}

} // namespace thrust
