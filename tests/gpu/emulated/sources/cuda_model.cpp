// gpu/cuda/cuda_model.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/cuda_model.cu"
