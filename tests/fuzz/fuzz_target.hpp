#pragma once
// The one entry point every fuzz target defines (libFuzzer's). Built twice:
// with clang's libFuzzer and sanitizers (scripts/fuzz), and with replay.cpp's
// main, which runs the committed corpus in the ordinary test suite, so every
// input that once crashed stays a regression test without clang.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace troupe::fuzz {

/// A directory of this process's own under the temporary directory, for
/// targets that hand their input to a reader as a file. It goes, with what
/// it holds, when the process exits (libFuzzer and replay both exit
/// normally), so runs leave nothing behind; a crash keeps it for a look.
class scratch_dir {
public:
  explicit scratch_dir(const std::string& target)
    : path_(std::filesystem::temp_directory_path()
            / ("troupe-" + target + "-fuzz-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
  std::filesystem::path path_;
};

} // namespace troupe::fuzz
