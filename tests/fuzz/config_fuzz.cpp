// Fuzz target: the config loader (config/node), as troupe-node runs it on a
// file of the operator's, or on one command-line argument (first byte odd).
// Every input must end in a result or in error messages, never in a crash,
// a hang or unbounded recursion.

#include <fstream>
#include <string>
#include <vector>

#include "config/node/node_config.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  static const troupe::fuzz::scratch_dir scratch("config");
  static const std::string path = scratch.file("input.conf");
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> args{"troupe-node", "--job_name=ps", "--task_index=0"};
  if (data[0] % 2 == 0) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    args.push_back("--config-file=" + path);
  } else {
    args.push_back(text);
  }
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  troupe::node_config cfg;
  auto outcome = troupe::load_node_config(cfg, static_cast<int>(argv.size()), argv.data());
  static_cast<void>(outcome);
  return 0;
}
