#pragma once
// The worker side of the bulk path: one connection to one shard (plain, or
// mutual TLS with the cluster's certificates), opened with the ticket the
// shard gave over BASP, carrying one exchange at a time: one request (a
// step's pull or push, its dense values and embedding rows together), or
// several sent back to back (a push, then the next step's pull), which the
// shard answers in order. complete_all drives
// the exchanges of several shards at once (a step's fan-out), each frame
// sent from the tensors' own storage and each reply read into storage the
// caller lends. Free of CAF.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/net/socket.hpp"
#include "tensor/core/wire_precision.hpp"

namespace troupe {

class bulk_link {
public:
  /// Connects to a shard's bulk port (under TLS with `tls`), shows its
  /// ticket; null with `error` set when the shard is unreachable or refuses.
  static std::unique_ptr<bulk_link> open(const std::string& host, uint16_t port, uint64_t run,
                                         uint64_t ticket, const std::string& label,
                                         bulk::deadline until, maybe_failure& error,
                                         const bulk::tls_context* tls = nullptr);

  // Each start_ asks one request. The requests started before the link is
  // driven (complete_all) form one exchange: sent together, answered in
  // order, their outcomes numbered 0, 1, ... in the order started. A start_
  // after that begins a new exchange.

  /// One table's part of a request, referenced in place (living until the
  /// exchange completes): keys as key_bits [n, 2]; a push's counts
  /// (count_bits [n]) and summed gradients [n, dim].
  struct table_part {
    int32_t table = 0;
    const tensor* keys = nullptr;
    const tensor* counts = nullptr;
    const tensor* gradients = nullptr;
  };

  /// A pull of `names` at `precision` and of each table's rows of its keys,
  /// read into `storage` (the values, then each table's rows; its tensors'
  /// memory is reused).
  void start_pull(uint64_t run, const std::vector<std::string>& names,
                  const std::vector<table_part>& tables, std::vector<tensor> storage,
                  wire_precision precision = wire_precision::fp32);
  /// Tensor `index` of the checkpoint copy `ticket` names, read into `storage`.
  void start_fetch(uint64_t run, uint64_t ticket, int32_t index, std::vector<tensor> storage);
  /// A granted step's push with its grant's proof: its gradients in the
  /// form `wire_code` names (a wire_precision's, or topk_wire_code) and each
  /// table's rows; `gradients` must live until the exchange completes.
  void start_push(uint64_t run, int32_t worker, int64_t step, uint64_t proof,
                  const std::vector<std::string>& names, const std::vector<tensor>& gradients,
                  const std::vector<table_part>& tables, int32_t wire_code = 0);

  /// After complete_all, request `i` of the exchange: the shard's refusal
  /// (its code and message), or a transport failure, which also marks the
  /// link broken and fails every request not answered yet.
  const maybe_failure& error(size_t i = 0) const noexcept;
  /// Request `i` got no answer: the link broke first.
  bool lost(size_t i = 0) const noexcept;
  bool broken() const noexcept { return broken_; }
  /// The shard's version after request `i` (a pull's values' or a push's).
  int64_t version(size_t i = 0) const noexcept;
  /// The shard's receipt for the step a push `i` carried.
  uint64_t receipt(size_t i = 0) const noexcept;
  /// Request `i`'s pulled values, in the order asked (the storage it lent
  /// otherwise).
  std::vector<tensor>& values(size_t i = 0);
  int32_t shard() const noexcept { return shard_; }

  /// Sends what it can, reads what has come; true once the reply is in
  /// (or the exchange failed).
  bool progress(bool readable, bool writable);
  /// What to poll the link's socket for.
  short events() const noexcept;
  /// Bytes of a reply already decrypted: progress needs no poll first.
  bool has_buffered() const noexcept { return ch_.has_buffered(); }
  int fd() const noexcept { return ch_.fd(); }

private:
  friend void complete_all(const std::vector<bulk_link*>& links, bulk::deadline until);
  bulk_link(bulk::channel ch, bulk::frame_limits limits, int32_t shard)
    : ch_(std::move(ch)), in_(limits), shard_(shard) {}
  /// Asks a request of kind `kind` (its meta section and tensors, which
  /// must outlive the exchange), its reply read into `storage`.
  void begin(bulk::frame_kind kind, const bulk::meta_writer& meta,
             const bulk::tensor_refs& data = {}, std::vector<tensor> storage = {});
  /// The reply read is request reading_'s; true once every request is answered.
  bool finish();
  /// The link broke: every request not answered yet fails with `why`.
  void fail(failure why);

  struct request {
    bulk::frame_kind expected;
    uint64_t number;
    std::vector<tensor> values; ///< storage lent for the reply, then its values
    maybe_failure error;
    bool lost = false;
    int64_t version = 0;
    uint64_t receipt = 0;
  };

  bulk::channel ch_;
  bulk::frame_reader in_;
  bulk::frame_writer out_;
  std::vector<request> requests_; // of the exchange under way (or last)
  size_t reading_ = 0;            // the request whose reply is read
  uint64_t next_number_ = 0;
  bool asking_ = false; // requests started, the link not yet driven
  bool done_ = true;
  bool broken_ = false;
  int32_t shard_ = -1;
};

/// Where a task reaches the shards in other processes on the bulk path,
/// and the chief's report channel (report_channel.hpp).
struct bulk_peers {
  std::vector<std::string> shard_hosts;         ///< each shard's host (empty: over BASP)
  std::shared_ptr<const bulk::tls_context> tls; ///< mutual TLS (null: plain TCP)
  /// The chief's host: where it listens for report connections and its
  /// workers open them (empty: reports over BASP).
  std::string chief_host;
};

/// Runs every started exchange to its replies, all at once; an exchange
/// still open at the deadline fails (and its link is broken).
void complete_all(const std::vector<bulk_link*>& links, bulk::deadline until);

} // namespace troupe
