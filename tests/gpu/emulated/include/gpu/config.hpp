#pragma once
// The emulated CUDA build (tests/gpu/emulated) contains the CUDA backend.
#define TROUPE_HAS_CUDA 1
