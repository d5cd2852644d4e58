#pragma once
// Errors thrown by the actor-free core (tensor/, gpu/). Actors catch them at the
// boundary and turn them into caf::error replies; nothing in the core aborts.
#include <stdexcept>
#include <string>

namespace troupe {

/// Base of every exception the core throws.
struct troupe_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Operands whose shapes do not fit the operation.
struct shape_error : troupe_error {
  using troupe_error::troupe_error;
};

/// A data file that is missing, truncated or not in the expected format.
struct data_error : troupe_error {
  using troupe_error::troupe_error;
};

} // namespace troupe
