#include "config/node/cluster_spec.hpp"

#include <algorithm>

namespace troupe {

maybe_failure parse_host_port(const std::string& text, host_port& out) {
  auto fail = [](std::string why) { return failure{errc::invalid_setting, std::move(why)}; };
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return fail("'" + text + "' is not host:port (e.g. \"127.0.0.1:7001\")");
  auto port_text = text.substr(colon + 1);
  if (!std::all_of(port_text.begin(), port_text.end(), ::isdigit) || port_text.size() > 5)
    return fail("'" + text + "' has an invalid port '" + port_text + "' (use 1..65535)");
  auto port = std::stoi(port_text);
  if (port < 1 || port > 65535)
    return fail("'" + text + "' has port " + port_text + " outside 1..65535");
  out.host = text.substr(0, colon);
  out.port = static_cast<uint16_t>(port);
  return std::nullopt;
}

} // namespace troupe
