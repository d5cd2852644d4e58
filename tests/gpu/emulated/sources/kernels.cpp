// gpu/cuda/kernels.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/kernels.cu"
