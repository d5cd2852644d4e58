// gpu/cuda/conv2d_layer.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/conv2d_layer.cu"
