// gpu/cuda/device.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/device.cu"
