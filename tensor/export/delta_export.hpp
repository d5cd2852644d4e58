#pragma once
// A model kept fresh where it is served: versions of it in one directory
// (export.dir; <log-dir>/serving by default), each a full base or a delta
// on the version before it:
//   base-<version>/               a full export (model_export.hpp) and
//                                 version.json (version, step)
//   delta-<version>.safetensors   what changed since version - 1:
//       embedding/keys    I64[n]       rows new or changed since then
//       embedding/values  F32[n, dim]  their values
//       embedding/deleted I64[m]       rows gone since then (evicted)
//       every dense variable whole, under its name
//   delta-<version>.json          its header: the version it applies to,
//                                 the step, the CRC-32 and size of the
//                                 .safetensors; written last, so a delta
//                                 exists once its header does
// The invariant (tested): the base of version b and deltas b+1 .. k applied
// in order equal the full export of version k, bit for bit (keys, values,
// dense variables). A delta that does not apply (another version, a
// checksum that differs, a value that is not finite) is refused whole,
// naming both versions, and the model stays as it was.
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/checkpoint/json.hpp"
#include "tensor/export/model_export.hpp"

namespace troupe {

/// delta-<version>.json.
struct delta_header {
  static constexpr int format_version = 1;
  int64_t version = 0;
  int64_t applies_to = 0; ///< the version it changes: version - 1
  int64_t step = 0;       ///< global steps trained at this version
  uint32_t crc32 = 0;     ///< of the whole .safetensors file
  uint64_t bytes = 0;
  uint64_t rows = 0;    ///< rows written
  uint64_t deleted = 0; ///< rows deleted

  json::value to_json() const;
  /// Throws checkpoint_error naming `path` and the field that is wrong.
  static delta_header from_json(const json::value& v, const std::string& path);
};

/// What changed in an embedding table between two versions.
struct table_change {
  std::vector<int64_t> keys;    ///< rows new or changed
  std::vector<float> values;    ///< their values, keys.size() x dim
  std::vector<int64_t> deleted; ///< rows gone
};

/// What the last version holds of a table: a 64-bit fingerprint of each
/// row's bytes (about 40 bytes a row), so that the next version's rows are
/// compared without holding the last version's values. Two different rows
/// with one fingerprint would be missed: about 10^-12 for 10^7 changed rows.
class row_fingerprints {
public:
  /// The rows of `rows` new or changed since the last track or diff, and
  /// the rows gone; `rows` is tracked from then on.
  table_change diff(const table_rows& rows, uint32_t dim);
  /// Tracks `rows` as they are (after a base).
  void track(const table_rows& rows, uint32_t dim);
  size_t rows() const noexcept { return rows_.size(); }

private:
  struct entry {
    uint64_t fingerprint = 0;
    uint64_t pass = 0; ///< the last pass that saw the row
  };
  std::unordered_map<int64_t, entry> rows_;
  uint64_t pass_ = 0;
};

/// "base-000000000012", "delta-000000000013": names sort as versions do.
std::string version_name(const char* kind, int64_t version);

/// Writes delta-<header.version>.safetensors, then its header (its CRC-32,
/// size and counts filled in here), each atomically into `dir`. `dim` 0: a
/// model without a table. Returns the header written.
delta_header write_delta(const std::string& dir, delta_header header, const table_change& change,
                         uint32_t dim, const std::vector<variable_spec>& variables,
                         const std::vector<tensor>& values);

/// Writes base-<version> into `dir`: a full export and version.json,
/// renamed into place once whole. Returns its path.
std::string write_base(const std::string& dir, int64_t version, const model_card& card,
                       const std::vector<variable_spec>& variables,
                       const std::vector<tensor>& values, const table_rows* table);

/// A model as served: an export and the version it is at.
struct served_model {
  exported_model model;
  int64_t version = 0;
};

/// Writes `served` into `dir` as an export (model_export.hpp) with its
/// version.json: what troupe-export --apply leaves.
void write_served(const std::string& dir, const served_model& served);

/// A base directory read back (its version.json against its name).
served_model read_base(const std::string& base_dir);

/// A delta read and checked against the model it is for: the file's
/// CRC-32 and size against its header, every shape against the model, every
/// value finite, every key one the table may hold. Throws checkpoint_error
/// naming the delta's version and what is wrong.
struct model_delta {
  delta_header header;
  table_change change;
  std::vector<tensor> params; ///< the network's variables, in its order
};
model_delta read_delta(const std::string& header_path, const exported_model& model);

/// Applies `delta` to `served`; a delta for another version is refused
/// (checkpoint_error naming both) before anything changes.
void apply_delta(served_model& served, const model_delta& delta);

/// The versions in a serving directory (those of deltas with a header).
struct version_listing {
  std::vector<int64_t> bases, deltas; ///< ascending
  int64_t newest() const;             ///< -1: none
};
version_listing list_versions(const std::string& dir);

/// The path of a version's base directory or delta header in `dir`.
std::string base_path(const std::string& dir, int64_t version);
std::string delta_path(const std::string& dir, int64_t version);

/// The newest version at most `upto` the directory builds: its newest base
/// at most `upto`, then each delta after it in order while one follows.
/// Throws checkpoint_error where no base is at most `upto`, or a delta of
/// the chain does not apply (naming it); with `refusal`, a delta that does
/// not apply ends the chain instead, and *refusal says why (a server keeps
/// the last good version).
served_model load_version(const std::string& dir,
                          int64_t upto = std::numeric_limits<int64_t>::max(),
                          std::string* refusal = nullptr);

} // namespace troupe
