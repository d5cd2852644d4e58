// gpu/cuda/dense_layer.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/dense_layer.cu"
