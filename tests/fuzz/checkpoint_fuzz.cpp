// Fuzz target: the checkpoint reader (tensor/checkpoint). The first byte
// picks what the rest is: even, a safetensors file (opened, every tensor
// read); odd, a manifest (parsed as JSON, then checked field by field).
// Whatever the bytes claim, the outcome is a value or a checkpoint_error /
// parse_error naming the problem, and memory follows the bytes present.

#include <fstream>
#include <string>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 2 == 0) {
      static const troupe::fuzz::scratch_dir scratch("checkpoint");
      static const std::string path = scratch.file("input.safetensors");
      std::ofstream(path, std::ios::binary | std::ios::trunc) << rest;
      troupe::safetensors_file file(path);
      for (auto& [name, entry] : file.entries())
        file.read(name);
    } else {
      troupe::checkpoint_manifest::from_json(troupe::json::parse(rest), "fuzz input");
    }
  } catch (const troupe::troupe_error&) {
    // refused, with a message: the expected outcome for most inputs
  }
  return 0;
}
