// gpu/cuda/device_memory.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/device_memory.cu"
