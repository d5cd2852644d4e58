#pragma once
// Where a worker computes, as a setting: "cpu" or "cuda:N". Header-only and
// backend-free, so the settings can parse and validate it without linking a
// GPU backend.
#include <cstdlib>
#include <string>

#include "tensor/core/error.hpp"

namespace troupe::gpu {

struct device_spec {
  enum class kind { cpu, cuda };
  kind type = kind::cpu;
  int index = 0;
  std::string to_string() const {
    return type == kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
  }
  bool operator==(const device_spec& other) const {
    return type == other.type && index == other.index;
  }
};

/// Parses "cpu" or "cuda:N"; throws troupe_error on anything else.
inline device_spec parse_device(const std::string& text) {
  if (text == "cpu")
    return {};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    long index = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && index >= 0 && index < 1024)
      return {device_spec::kind::cuda, static_cast<int>(index)};
  }
  throw troupe_error("invalid device '" + text + "': use cpu or cuda:N (e.g. cuda:0)");
}

} // namespace troupe::gpu
