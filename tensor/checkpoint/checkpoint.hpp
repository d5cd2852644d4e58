#pragma once
// A checkpoint: a directory per global step under the run's log directory,
//   <log-dir>/ckpt-<step>/manifest.json     what is where, with checksums
//   <log-dir>/ckpt-<step>/ps-<k>.safetensors the tensors shard k held
//   <log-dir>/checkpoint                    names the latest complete one
// Every file is written under a temporary name, synced and renamed; the
// directory is renamed into place once complete, and the pointer file is
// updated last, so a process killed in the middle of a save leaves the
// previous checkpoint as the latest. Tensors keep TensorFlow's names
// (`fc1/weights`, `fc1/weights/part_1/Adam`), and the manifest records each
// slice's offset in its logical variable, so a checkpoint restores onto any
// number of shards and any placement.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensor/checkpoint/json.hpp"
#include "tensor/checkpoint/safetensors.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// One tensor of a checkpoint: a slice of a variable, or of one of its
/// optimizer slots.
struct saved_tensor {
  std::string key;      ///< its name in the file: the slice's, plus "/<slot>" for a slot
  std::string variable; ///< the logical variable: "fc1/weights"
  std::string slot;     ///< empty for the variable, else the slot ("Adam", "momentum", ...)
  int32_t axis = 0;     ///< the axis the variable is split along
  int64_t offset = 0;   ///< first index along that axis
  std::string file;     ///< within the checkpoint directory
};

struct saved_file {
  std::string name;
  uint32_t crc32 = 0;
  uint64_t bytes = 0;
};

/// Where a worker was in its data: the next example it reads.
struct data_position {
  int32_t worker = 0;
  uint64_t epoch = 0;
  uint64_t offset = 0; ///< within its share of the epoch
  /// The share it read in that epoch (elastic membership changes it);
  /// count 0: not recorded (older checkpoints), its index of the listed workers.
  int32_t share_rank = 0;
  int32_t share_count = 0;
};

struct checkpoint_manifest {
  static constexpr int format_version = 1;
  int64_t step = 0; ///< global steps trained
  /// What must not change across a restore ("model", "optimizer", "slots").
  std::map<std::string, std::string> fingerprint;
  std::vector<std::pair<std::string, shape_t>> variables; ///< full shapes
  std::vector<saved_tensor> tensors;
  std::vector<saved_file> files;
  std::vector<int64_t> shard_updates; ///< each shard's update count when saved
  std::vector<data_position> data;

  json::value to_json() const;
  /// Throws checkpoint_error naming `path` and the field that is wrong.
  static checkpoint_manifest from_json(const json::value& v, const std::string& path);
  /// The full shape of `variable`; nullptr when the checkpoint lacks it.
  const shape_t* shape_of(const std::string& variable) const;
};

/// Writes `text` to `path` durably: a temporary file, fsync, rename, and an
/// fsync of the directory. Throws checkpoint_error.
void write_file_atomically(const std::string& path, const std::string& text);

/// A small file's contents; throws checkpoint_error naming it when it is
/// missing or larger than `limit` bytes (read before trusting its size).
std::string read_file_bounded(const std::string& path, size_t limit);

/// The step of a checkpoint directory named ckpt-<step>, or -1.
int64_t checkpoint_step_of(const std::string& directory_name);

/// The log directory's checkpoints.
class checkpoint_dir {
public:
  explicit checkpoint_dir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const noexcept { return root_; }

  /// A fresh, empty directory to write the checkpoint of `step` into.
  std::string begin(int64_t step) const;
  /// Writes the manifest into `staging`, moves it to ckpt-<step>, points
  /// the pointer file at it, and deletes all but the newest `keep`
  /// complete checkpoints (and leftovers of torn saves). Returns its path.
  std::string commit(const std::string& staging, const checkpoint_manifest& manifest,
                     int keep) const;

  /// The checkpoint the pointer file names, if any.
  std::optional<std::string> latest() const;
  /// Complete checkpoints (with a manifest), newest first.
  std::vector<std::string> complete() const;

private:
  std::string root_;
};

/// A checkpoint opened for restoring, checked whole before anyone uses it:
/// the manifest against the files' sizes and checksums, every variable's
/// (and slot's) slices tiling it exactly along one axis, every value
/// finite, and each shard's update count against the step. Throws
/// checkpoint_error naming the file and the problem (--restore=auto then
/// falls back to an older checkpoint).
class checkpoint_reader {
public:
  explicit checkpoint_reader(std::string dir);

  const checkpoint_manifest& manifest() const noexcept { return manifest_; }
  const std::string& dir() const noexcept { return dir_; }
  /// The whole of `variable` (or of its `slot`), assembled from its slices;
  /// throws checkpoint_error when the slices do not tile it exactly.
  tensor assemble(const std::string& variable, const std::string& slot = "") const;
  /// The slot names saved for `variable`.
  std::vector<std::string> slots_of(const std::string& variable) const;
  /// The checkpoint's files, opened and checked, by name (an embedding
  /// table's rows lie in them by key: table_file.hpp).
  const std::map<std::string, safetensors_file>& files() const noexcept { return files_; }

private:
  /// The slices of `variable` (or its `slot`), checked to tile it exactly.
  std::vector<const saved_tensor*> layout_of(const std::string& variable,
                                             const std::string& slot) const;
  void check_layout() const;
  void check_values() const;
  void check_update_counts() const;

  std::string dir_;
  checkpoint_manifest manifest_;
  std::map<std::string, safetensors_file> files_;
};

} // namespace troupe
