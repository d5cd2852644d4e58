#include "tensor/core/error.hpp"

namespace troupe {

const char* to_string(errc code) {
  switch (code) {
#define TROUPE_ERRC_NAME(name)                                                                     \
  case errc::name:                                                                                 \
    return #name;
    TROUPE_ERROR_CODES(TROUPE_ERRC_NAME)
#undef TROUPE_ERRC_NAME
    case errc::first_code_:
    case errc::end_of_codes_:
      break;
  }
  return "unknown_error";
}

} // namespace troupe
