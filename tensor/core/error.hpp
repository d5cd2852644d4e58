#pragma once
// Troupe's two error idioms, written down in docs/errors.md:
// - exceptions (troupe_error and its kinds) for what the actor-free core
//   (tensor/, gpu/, the settings) cannot go on with: a shape that does not
//   fit, a data file that is wrong, a setting out of range. Actors and apps
//   catch them at their boundary; nothing in the core aborts.
// - maybe_failure (an errc and a message naming the problem; empty = fine)
//   for checks whose refusal is an ordinary answer: a request a shard
//   refuses, a setting the validation reports. protocol.hpp registers errc
//   with CAF, so a failure crosses the wire as a caf::error.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

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

// The one list of error codes: the enum and its names are generated from it,
// so a code cannot lack its name. Values start at 1 (0 means "no error" to
// CAF) and never change: they cross the wire.
#define TROUPE_ERROR_CODES(X)                                                                      \
  X(unknown_variable)    /* a pull or push names a variable the shard does not hold */             \
  X(shape_mismatch)      /* a pushed gradient's shape differs from its variable's */               \
  X(non_finite_gradient) /* a pushed gradient holds NaN or infinity */                             \
  X(not_initialized)     /* pull or push before the chief initialised the shard */                 \
  X(already_initialized) /* a second init: the chief initialises exactly once */                   \
  X(protocol_mismatch)   /* the peer speaks another protocol version */                            \
  X(training_stopped)    /* the request arrived after training stopped */                          \
  X(invalid_request)     /* malformed arguments (e.g. names and values differ in count) */         \
  X(stale_gradient)      /* sync: a gradient for a step the shard has already applied */           \
  X(invalid_setting)     /* a setting out of its range, or settings that do not fit together */    \
  X(unauthorized)        /* from a party that may not send it, or for another run */               \
  X(snapshot_passed)     /* a snapshot asked for a version the shard has already passed */

enum class errc : uint8_t {
  first_code_ = 0,
#define TROUPE_ERRC_ENUMERATOR(name) name,
  TROUPE_ERROR_CODES(TROUPE_ERRC_ENUMERATOR)
#undef TROUPE_ERRC_ENUMERATOR
    end_of_codes_
};

/// "unknown_variable", ...; "unknown_error" for a value outside the list.
const char* to_string(errc code);

/// A refused request or value: what went wrong and a message naming it.
struct failure {
  errc code;
  std::string message;
};

/// std::nullopt: accepted.
using maybe_failure = std::optional<failure>;

/// Input echoed in a message: `text` in single quotes, control characters
/// as '?', cut to its first `most` characters with its length said where it
/// is longer, so that a 10 MB field makes a line, not 10 MB of log.
std::string quote_input(std::string_view text, size_t most = 40);

} // namespace troupe
