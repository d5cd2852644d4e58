#pragma once
// One exchange with the shards of a plan: per shard part a pull, a push, a
// push followed by a pull, or a fetch of a checkpoint copy's tensor. A pull
// is one request (the part's dense values and each table's rows), a push
// is one request (the step's gradients and rows: the shard takes it whole,
// once). Each request goes on the bulk path where the shard has a link and
// over BASP (the message path) where it has none: both are asked the same
// requests and answer the same outcome, and requests to one shard are
// answered in the order asked, so a push then a pull go together. The
// caller starts an exchange, may compute meanwhile, and finishes it: what
// each part came back with (values, rows, the shard's receipt or refusal,
// or a loss) arrives in one place, whichever path carried it.
//
// The bulk parts run to their replies at once (blocking the caller, which
// is detached) or on a thread of their own while the caller computes. The
// BASP parts' replies arrive through the caller's mailbox and are handed in
// by the message path. An exchange voided by cancel() (a lost peer, a new
// plan) ignores the replies still due. Free of CAF.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/net/background_exchange.hpp"
#include "actors/net/bulk_client.hpp"
#include "actors/protocol/messages.hpp"
#include "tensor/core/wire_precision.hpp"

namespace troupe {

enum class exchange_kind {
  pull, ///< values of the part's names and rows of its tables' keys
  push, ///< gradients of the part's names and rows of its tables: one step
  push_then_pull,
  fetch, ///< a tensor of a shard's checkpoint copy (exchange_part::copy), moved out of it
};

/// A tensor of a shard's checkpoint copy: the copy's ticket and the index.
struct copy_tensor {
  uint64_t ticket = 0;
  int32_t index = 0;
};

/// What a push shows besides its gradients: the run, the worker, the
/// granted step and the grant's proof; and how its tensors (a pull's
/// values, a push's gradients) cross the wire.
struct push_header {
  uint64_t run = 0;
  int32_t worker = 0;
  int64_t step = 0;
  uint64_t proof = 0;
  wire_precision precision = wire_precision::fp32;
  bool topk = false; ///< a push's gradients are top-k pairs (train.push-topk)
};

/// The wire code a push names for its gradients' form.
inline int32_t push_wire_code(const push_header& h) {
  return h.topk ? topk_wire_code : static_cast<int32_t>(h.precision);
}

/// One embedding table's rows in a part: the keys (bulk::key_bits); a
/// push's occurrences (bulk::count_bits) and summed gradients [keys, dim];
/// a pull's storage for the rows, lent.
struct part_rows {
  int32_t table = 0;
  tensor keys;
  tensor counts;
  tensor gradients;
  std::vector<tensor> storage;
};

/// One shard's part of an exchange.
struct exchange_part {
  int32_t shard = 0;
  /// The dense variables pulled or pushed (null: none); must outlive the
  /// exchange.
  const std::vector<std::string>* names = nullptr;
  /// A pull's storage, lent (a tensor of the right size is filled in place;
  /// an empty one takes the part's storage of its last bulk pull).
  std::vector<tensor> storage;
  std::vector<tensor> gradients; ///< a push's
  copy_tensor copy;              ///< a fetch's
  std::vector<part_rows> rows;   ///< the embedding tables' rows it carries
};

/// What a part came back with.
struct part_outcome {
  std::vector<tensor> values;    ///< pulled, in the order of the names
  std::vector<tensor> rows;      ///< pulled, a tensor [keys, dim] per table, in order
  std::vector<tensor> gradients; ///< pushed on the bulk path, back for reuse (none over BASP)
  maybe_failure refused;         ///< the shard refused the push (its code and message)
  uint64_t receipt = 0;          ///< the shard's receipt for a push it took
  /// The part failed otherwise: the shard could not be reached, its link
  /// broke, or it refused the pull. The run must recover.
  std::optional<std::string> lost;
};

/// The message path: pulls, pushes and fetches as requests to a shard's
/// actor, answered through the caller's mailbox (exchange/basp_path.hpp).
class message_path {
public:
  virtual ~message_path() = default;
  /// The reply, or a failure: `refused` is the shard's answer; otherwise
  /// the request itself failed (`lost`).
  using pull_done = std::function<void(pull_reply& reply, const maybe_failure& refused,
                                       const std::optional<std::string>& lost)>;
  using push_done = std::function<void(const push_receipt& answer, const maybe_failure& refused,
                                       const std::optional<std::string>& lost)>;
  virtual void pull(int32_t shard, pull_request request, pull_done done) = 0;
  virtual void push(int32_t shard, step_push push, push_done done) = 0;
  /// The one tensor in the reply's values.
  virtual void fetch(int32_t shard, uint64_t run, const copy_tensor& copy, pull_done done) = 0;
};

class shard_exchange {
public:
  using finished = std::function<void(std::vector<part_outcome>& outcomes)>;

  /// `basp` must outlive the exchange; `timeout` bounds each bulk part.
  shard_exchange(message_path& basp, std::chrono::milliseconds timeout);
  ~shard_exchange();
  shard_exchange(const shard_exchange&) = delete;
  shard_exchange& operator=(const shard_exchange&) = delete;

  /// Forgets every link (cancelling what runs): `shards` shards, all over
  /// BASP until set_link gives one a bulk link.
  void reset_links(size_t shards);
  void set_link(int32_t shard, std::unique_ptr<bulk_link> link);
  bool has_link(int32_t shard) const;

  /// Starts `kind` on every part. `in_background`: the bulk parts run on a
  /// thread of their own until finish(); otherwise to their replies now.
  void start(exchange_kind kind, const push_header& header, std::vector<exchange_part> parts,
             bool in_background);
  /// Runs `done` with every part's outcome once all are in: now, or from
  /// the handler of the last BASP reply still due. Nothing under way: `done`
  /// gets no outcomes.
  void finish(finished done);
  /// Voids the exchange under way: its bulk parts are shut down (those links
  /// break and are dropped), its BASP replies ignored.
  void cancel();
  bool active() const noexcept { return active_; }
  /// A part's pulled storage, for that shard's next bulk pull.
  void give_back(int32_t shard, std::vector<tensor> storage);

private:
  /// A part on a bulk link, and which of the link's requests answer its
  /// push and its pull (-1: none).
  struct bulk_part {
    size_t index; // into parts_
    bulk_link* link;
    int push = -1;
    int pull = -1;
  };
  void ask_link(exchange_kind kind, const push_header& header, bulk_part& b);
  void ask_basp(exchange_kind kind, const push_header& header, size_t i);
  void drive_links(bool in_background);
  void basp_reply();
  void collect_bulk();
  std::vector<tensor> pull_storage(exchange_part& part);

  message_path& basp_;
  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<bulk_link>> links_; // per shard; null: over BASP
  std::vector<std::vector<tensor>> spare_;        // per shard: storage for the next bulk pull
  std::vector<exchange_part> parts_;
  std::vector<part_outcome> outcomes_;
  std::vector<bulk_part> bulk_;
  exchange_kind kind_ = exchange_kind::pull;
  bool active_ = false;
  size_t pending_ = 0; // BASP replies still due
  finished done_;
  uint64_t epoch_ = 0; // which exchange a BASP reply belongs to
  std::unique_ptr<background_exchange> runner_;
};

} // namespace troupe
