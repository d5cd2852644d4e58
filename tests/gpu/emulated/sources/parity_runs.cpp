// gpu/cuda/parity_runs.cu compiled by the C++ compiler against the emulated runtime.
#include "gpu/cuda/parity_runs.cu"
