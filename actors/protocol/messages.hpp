#pragma once
// The plain messages of the Troupe protocol, without CAF: what a step, a
// shard's reply, a report and a checkpoint's piece hold. The shard's service
// and the worker's step take and give these whatever carries them (BASP or
// the bulk path); wire.hpp says how each crosses the wire, and the role
// headers beside it which actor may send which.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/tensor.hpp"

namespace troupe {

/// A run's identity: a random number the chief draws at start. Every message
/// that reads or changes training state carries it (or comes from the one
/// actor allowed to send it), so that a node of another cluster, or of a
/// previous run, is refused with errc::unauthorized.
using run_id = uint64_t;

// -- a step's requests to a shard ----------------------------------------------

/// The rows a pull asks of one embedding table: distinct keys, each one the
/// shard owns.
struct table_keys {
  int32_t table = 0;
  std::vector<int64_t> keys;
};

/// A pull: the dense values of `names` at wire precision `precision` (a
/// wire_precision), and the rows of each table's keys, read together.
struct pull_request {
  run_id run = 0;
  std::vector<std::string> names;
  int32_t precision = 0;
  std::vector<table_keys> tables;
};

/// A shard's answer to a pull: the values in the order asked, each table's
/// rows [keys, dim] in the order asked, and the number of updates the shard
/// has applied so far (its version; in sync mode, the global step).
struct pull_reply {
  int64_t version = 0;
  std::vector<tensor> values;
  std::vector<tensor> rows;
};

/// A step's rows of one embedding table for one shard: distinct keys, their
/// occurrences in the batch, and the gradients summed per key [keys, dim].
struct step_rows {
  int32_t table = 0;
  std::vector<int64_t> keys;
  std::vector<uint32_t> counts;
  tensor grads;
};

/// One worker's push of one granted step to one shard: everything the step
/// changes there (dense gradients packed at `precision`, a wire_precision
/// or topk_wire_code, and each table's rows), checked as a whole, applied
/// together and once.
struct step_push {
  run_id run = 0;
  int32_t worker = 0;
  int64_t step = 0;
  uint64_t proof = 0; ///< the grant's (grant_proof.hpp)
  int32_t precision = 0;
  std::vector<std::string> names;
  std::vector<tensor> gradients;
  std::vector<step_rows> tables;
};

/// A shard's answer to a push: its version after it, and its receipt for
/// the step (grant_proof.hpp): what the worker's report shows its
/// coordinator, which no one without the run's key can make.
struct push_receipt {
  int64_t version = 0;
  uint64_t receipt = 0;
};

// -- reports and grants ----------------------------------------------------------

/// A worker's account of one step. step < 0 means "no step yet" (the first
/// report of a worker only asks for a step). applied = false means at least
/// one shard refused its part (in sync mode also stale or past the end).
/// `receipt`: the shards' receipts for the step, combined (step_receipts);
/// an applied step without them is a lie.
struct step_report {
  run_id run = 0;
  int32_t worker = 0;
  int64_t step = -1;
  bool applied = false;
  double loss = 0;
  uint64_t correct = 0;
  uint64_t examples = 0;
  uint64_t data_epoch = 0;  ///< where the worker's next example lies: the epoch
  uint64_t data_offset = 0; ///<   and the offset within its share of it,
  int32_t share_rank = 0;   ///<   which is share_rank of share_count (elastic
  int32_t share_count = 0;  ///<   membership changes it where an epoch begins)
  uint64_t receipt = 0;
};

/// The answer to a report: compute at global step `step` next, or stop.
/// `proof` is what the worker's pushes of that step must show the shards
/// (actors/protocol/grant_proof.hpp).
struct step_grant {
  int64_t step = 0;
  bool stop = false;
  uint64_t proof = 0;
};

/// What a worker's program reported of its own (the Python package's
/// w.report: an AUC its code computed): the chief keeps each name's last
/// value for the final line.
struct reported_metrics {
  static constexpr size_t max_names = 64;
  static constexpr size_t max_name = 64;
  run_id run = 0;
  int32_t worker = 0;
  std::vector<std::string> names;
  std::vector<double> values;
};

/// Sync mode: what the token queue tells the chief after each update.
struct step_summary {
  int64_t step = 0; ///< the global step reached
  double loss = 0;  ///< mean loss of the applied gradients
  uint64_t correct = 0;
  uint64_t examples = 0;   ///< examples behind the applied gradients
  double straggler_ms = 0; ///< first to R-th gradient, slowest shard
  uint64_t dropped = 0;    ///< gradients of this step not applied (stale, refused)
  uint64_t tokens = 0;     ///< tokens released by this update
  /// Where each worker's next example lies, as last reported (for checkpoints).
  std::vector<int32_t> position_workers;
  std::vector<uint64_t> position_epochs;
  std::vector<uint64_t> position_offsets;
  std::vector<int32_t> position_share_ranks;
  std::vector<int32_t> position_share_counts;
};

// -- a shard's figures and state ------------------------------------------------

/// One variable's (or slice's) traffic on a shard.
struct variable_traffic {
  std::string name;
  uint64_t bytes_in = 0;  ///< gradient payload received by pushes
  uint64_t bytes_out = 0; ///< value payload sent in pull replies
};

/// One embedding table on one shard: its rows, bytes, what entered and left
/// it, and its hottest keys (the most frequently pushed, with their counts).
struct table_report {
  std::string name;
  uint64_t rows = 0;
  uint64_t bytes = 0;
  uint64_t admitted = 0;
  uint64_t evicted = 0;
  uint64_t not_admitted = 0; ///< occurrences dropped before admission
  std::vector<int64_t> hottest_keys;
  std::vector<uint32_t> hottest_counts;
};

/// A shard's traffic since it started: what the chief's final report shows.
struct shard_traffic {
  int32_t shard = 0;
  uint64_t bytes_held = 0; ///< variables' bytes (slots not counted)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t pulls = 0;
  uint64_t pushes = 0;
  int64_t updates = 0; ///< updates applied (the shard's version): the chief cross-checks it
  std::vector<variable_traffic> variables; ///< by name
  /// Pushes refused because nobody granted their step to the worker they
  /// name: a stranger's or a forger's (none in a healthy run).
  uint64_t unauthorized_pushes = 0;
  /// Embedding rows: requests and keys (the pulls and pushes above count them too).
  uint64_t row_pulls = 0;
  uint64_t row_pushes = 0;
  uint64_t keys_pulled = 0;
  uint64_t keys_pushed = 0;
  std::vector<table_report> tables;
  /// Pushes of a step the shard had applied already, not applied again: a
  /// step granted again after its worker was lost or held it too long, or
  /// a replay.
  uint64_t repeated_pushes = 0;
};

/// A shard's copy of its state for a checkpoint: its update count and the
/// names and shapes of what it copied (variables, then "<variable>/<slot>"),
/// fetched one tensor at a time by index. The ticket, drawn at random by the
/// shard and known only to the chief, is what a fetch must show: the chief
/// hands it to the writer that fetches in its place.
struct snapshot_index {
  int64_t version = 0;
  uint64_t ticket = 0;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  /// Each tensor's element type as the file stores it (element_type: 0 F32,
  /// 1 I64, 2 U32; empty: all F32). An I64 or U32 tensor travels as floats
  /// holding its bytes: an embedding table's keys and counters.
  std::vector<int32_t> types;
  /// The file's metadata, key then value ("emb/<table>" -> its layout).
  std::vector<std::string> metadata;
};

/// Rows of an embedding table restored from a checkpoint (the chief sends
/// each shard the rows whose buckets it owns): keys, their counters, and
/// payloads [keys, value + optimizer slots], blocks checked like row_keys.
struct restored_rows {
  int32_t table = 0;
  std::vector<int64_t> keys;
  std::vector<uint32_t> frequencies;
  std::vector<uint32_t> last_updates;
  tensor payloads;
};

// -- checkpoints for evaluators ------------------------------------------------

/// A checkpoint as the chief's checkpoint source offers it to an evaluator:
/// its step (-1: none newer than asked), whether the run is over (nothing
/// newer will come), and its files, relative to the log directory
/// ("model.json", "ckpt-<step>/...") with their sizes.
struct checkpoint_listing {
  int64_t step = -1;
  bool final = false;
  std::vector<std::string> files;
  std::vector<uint64_t> sizes;
};

/// The most bytes one ckpt_read answers with.
constexpr uint64_t checkpoint_chunk_bytes = uint64_t{1} << 20;

/// A piece of a checkpoint file, and the token the follower shows with its
/// next read: proof that this piece reached it (read_window.hpp).
struct checkpoint_chunk {
  std::string bytes;
  uint64_t token = 0;
};

} // namespace troupe
