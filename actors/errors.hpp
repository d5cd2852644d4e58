#pragma once
// Error codes that actors answer with. CAF-free so that the plain classes
// (variable_store, step_budget) can use them; protocol.hpp registers the enum
// with CAF under the category "troupe".
#include <cstdint>
#include <optional>
#include <string>

namespace troupe {

enum class errc : uint8_t {
  unknown_variable = 1,   ///< a pull or push names a variable the shard does not hold
  shape_mismatch,         ///< a pushed gradient's shape differs from its variable's
  non_finite_gradient,    ///< a pushed gradient holds NaN or infinity
  not_initialized,        ///< pull or push before the chief initialised the shard
  already_initialized,    ///< a second init: the chief initialises exactly once
  protocol_mismatch,      ///< the peer speaks another protocol version
  training_stopped,       ///< the request arrived after the chief stopped training
  invalid_request,        ///< malformed arguments (e.g. names and values differ in count)
  stale_gradient,         ///< sync: a gradient for a step the shard has already applied
};

/// "unknown_variable", ...
const char* to_string(errc code);

/// A refused request: what went wrong and a message naming it.
struct failure {
  errc code;
  std::string message;
};

using maybe_failure = std::optional<failure>;

} // namespace troupe
