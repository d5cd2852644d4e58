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

std::string quote_input(std::string_view text, size_t most) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < most; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  if (text.size() <= most)
    return out + "'";
  return out + "...' (" + std::to_string(text.size()) + " bytes)";
}

} // namespace troupe
