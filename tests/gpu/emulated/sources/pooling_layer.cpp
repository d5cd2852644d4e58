// gpu/cuda/pooling_layer.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/pooling_layer.cu"
