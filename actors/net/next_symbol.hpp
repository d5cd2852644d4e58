#pragma once
// The definition an interposer stands in front of (libc's accept and
// connect, libssl's SSL_read...): looked up once, and a process that cannot
// find it stops at once rather than run without it.
#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>

namespace troupe {

template <class Fn>
Fn next_symbol(const char* name, const char* library) {
  auto found = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  if (found == nullptr) {
    std::fprintf(stderr, "troupe: cannot find %s in %s: %s\n", name, library, dlerror());
    std::abort();
  }
  return found;
}

} // namespace troupe
