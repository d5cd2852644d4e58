// gpu/cuda/elementwise_layers.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/elementwise_layers.cu"
