#pragma once
// CAF's own sections ([scheduler], [work-stealing], [middleman]) are read by
// CAF without a range check: max-threads = 0 or a steal interval of 0 is a
// division by zero (SIGFPE), max-throughput = 0 never runs an actor, and a
// heartbeat of 1ns floods every link. Each key a node uses gets a range here.
#include <string>
#include <vector>

#include "config/node/node_config.hpp"

namespace troupe {

/// One error per CAF key outside its range, naming key, value and range.
void check_caf_sections(const node_config& cfg, std::vector<std::string>& errors);

} // namespace troupe
