// The files a set's paths and globs name, each checked to be a regular file.
#include <glob.h>
#include <sys/stat.h>

#include "tensor/data/catalog.hpp"

namespace troupe {

namespace {

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

// Data files are read whole, more than once (the catalog's pass, then each
// worker's): a FIFO would block the task and a directory or device is no
// data. Anything but a regular file is refused by name.
void require_regular_file(const std::string& path, const char* key) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return; // the reader names a missing file, as before
  if (S_ISREG(info.st_mode))
    return;
  const char* what = S_ISDIR(info.st_mode)    ? "a directory"
                     : S_ISFIFO(info.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(info.st_mode) ? "a socket"
                                              : "a device";
  throw data_error(std::string(key) + ": '" + path + "' is " + what
                   + ", not a regular file; data files are read whole, more than once: give "
                     "files (a glob such as 'dir/*.csv' names a directory's)");
}

} // namespace

std::vector<std::string> expand_paths(const std::vector<std::string>& patterns, const char* key) {
  std::vector<std::string> out;
  for (auto& pattern : patterns) {
    if (!has_glob_characters(pattern)) {
      require_regular_file(pattern, key);
      out.push_back(pattern);
      continue;
    }
    glob_t found{};
    int rc = glob(pattern.c_str(), 0, nullptr, &found);
    if (rc != 0 || found.gl_pathc == 0) {
      globfree(&found);
      throw data_error(std::string(key) + ": '" + pattern + "' matches no file");
    }
    auto first = out.size();
    for (size_t i = 0; i < found.gl_pathc; ++i)
      out.emplace_back(found.gl_pathv[i]); // glob sorts
    globfree(&found);
    for (auto i = first; i < out.size(); ++i)
      require_regular_file(out[i], key);
    if (out.size() > data_limits::max_files)
      throw data_error(std::string(key) + ": more than " + std::to_string(data_limits::max_files)
                       + " files");
  }
  return out;
}

} // namespace troupe
