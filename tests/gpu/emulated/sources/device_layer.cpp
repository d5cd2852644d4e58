// gpu/cuda/device_layer.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/device_layer.cu"
