#pragma once
// How a Troupe process keeps the memory of its large tensors. glibc returns
// every block above 128 KiB (a tensor of a real model) to the kernel when
// it is freed, so the next pull or push of the same size page-faults and
// zero-fills all of it again: on a 40 MB tensor that cost more than moving
// it through the socket (docs/results.md, "Transfer"). Kept, a freed
// tensor's memory serves the next one.
namespace troupe {

/// Keeps freed blocks of up to 1 GiB in the process's heap, one heap for
/// every thread (call once, at start). Peak memory does not grow: what is
/// kept is what was in use.
void keep_freed_tensor_memory() noexcept;

} // namespace troupe
