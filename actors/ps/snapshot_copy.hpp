#pragma once
// A shard's copy of its state for a checkpoint, taken between two updates
// and handed out one tensor at a time, so that the chief's writer never
// holds more than one tensor of it and the shard frees each as it goes.
// Variables are copied when the copy is taken (they are small beside the
// tables); an embedding table is a frozen view of the live rows
// (table_snapshot), each piece read when it is fetched, so a save does not
// double the table. Thread-safe: the shard takes copies on its own thread,
// and its bulk connections' threads hand tensors out beside BASP fetches.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "actors/protocol/messages.hpp"
#include "actors/ps/variable_store.hpp"
#include "tensor/checkpoint/table_file.hpp"

namespace troupe {

class snapshot_copy {
public:
  /// Replaces any earlier copy (its unfetched tensors are dropped, its
  /// views of the tables end); `ticket` is what fetches of this copy must
  /// show. `tables`: the shard's embedding tables, frozen at the same
  /// point, whose fields follow the variables (each as floats holding its
  /// bytes), in pieces of at most `piece_rows` rows: consecutive entries of
  /// one name are one field, so that no piece is larger than a request of
  /// rows (the limit every peer's wire was sized by).
  snapshot_index take(variable_store::snapshot copy, uint64_t ticket,
                      std::vector<table_snapshot> tables = {},
                      size_t piece_rows = size_t{1} << 20) {
    snapshot_index index{copy.version, ticket, copy.names, {}, {}, {}};
    for (auto& v : copy.values)
      index.shapes.push_back(v.shape());
    if (!tables.empty())
      index.types.assign(copy.values.size(), static_cast<int32_t>(element_type::f32));
    std::vector<piece> pieces;
    for (size_t t = 0; t < tables.size(); ++t) {
      auto entries = tables[t].entries();
      for (size_t e = 0; e < entries.size(); ++e) {
        auto& entry = entries[e];
        auto rows = static_cast<size_t>(entry.shape.at(0));
        size_t first = 0;
        do {
          auto n = std::min(piece_rows, rows - first);
          auto shape = entry.shape;
          shape[0] = static_cast<int64_t>(n);
          pieces.push_back({t, e, first, n, shape, entry.type});
          index.names.push_back(entry.name);
          index.shapes.push_back(shape);
          index.types.push_back(static_cast<int32_t>(entry.type));
          first += n;
        } while (first < rows);
      }
      auto [key, value] = tables[t].metadata();
      index.metadata.push_back(key);
      index.metadata.push_back(value);
    }
    std::lock_guard<std::mutex> guard{mutex_};
    copy_ = std::move(copy);
    tables_ = std::move(tables);
    pieces_ = std::move(pieces);
    ticket_ = ticket;
    fetched_.assign(copy_.values.size() + pieces_.size(), false);
    left_ = fetched_.size();
    return index;
  }

  /// Drops the copy (a new run: its ticket opens nothing any more).
  void clear() {
    std::lock_guard<std::mutex> guard{mutex_};
    drop();
  }

  /// Tensor `index` of the copy with `ticket`, for a peer of `run` (the
  /// store's run check first: the one check of BASP and bulk fetches alike),
  /// moved out: each once. The copy's version in `version`.
  std::variant<tensor, failure> fetch(const variable_store& store, uint64_t run,
                                      const std::string& owner, uint64_t ticket, int32_t index,
                                      int64_t* version = nullptr) {
    if (auto why = store.other_run(run))
      return failure{errc::unauthorized, owner + ": " + *why};
    std::lock_guard<std::mutex> guard{mutex_};
    if (left_ == 0 || ticket != ticket_)
      return failure{errc::unauthorized,
                     owner
                       + " holds no snapshot with that ticket (fetched, replaced, or never "
                         "taken)"};
    if (index < 0 || static_cast<size_t>(index) >= fetched_.size()
        || fetched_[static_cast<size_t>(index)])
      return failure{errc::invalid_request, owner + ": snapshot tensor " + std::to_string(index)
                                              + " does not exist or was fetched already"};
    auto i = static_cast<size_t>(index);
    fetched_[i] = true;
    if (version)
      *version = copy_.version;
    tensor out;
    if (i < copy_.values.size())
      out = std::move(copy_.values[i]);
    else
      try {
        out = read_piece(pieces_[i - copy_.values.size()]);
      } catch (const troupe_error& e) { // the checkpoint fails, not the shard
        drop();
        return failure{errc::invalid_request, owner + ": " + e.what()};
      }
    if (--left_ == 0)
      drop();
    return out;
  }

  /// Tensors still held.
  size_t left() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return left_;
  }

private:
  /// Rows [first, first + rows) of entry `entry` of tables_[table].
  struct piece {
    size_t table, entry, first, rows;
    shape_t shape;
    element_type type;
  };

  // F32 pieces keep their shape; I64 and U32 ones travel as the floats
  // that hold their bytes.
  tensor read_piece(const piece& p) const {
    auto& table = tables_[p.table];
    auto bytes = p.rows * table.row_bytes(p.entry);
    tensor out(p.type == element_type::f32
                 ? p.shape
                 : shape_t{static_cast<int64_t>((bytes + 3) / sizeof(float))});
    if (bytes > 0)
      table.copy_rows(p.entry, p.first, p.rows, out.data());
    return out;
  }

  void drop() {
    copy_ = {};
    tables_.clear(); // ends the views: their copied rows are freed
    pieces_.clear();
    fetched_.clear();
    left_ = 0;
  }

  mutable std::mutex mutex_;
  variable_store::snapshot copy_;
  std::vector<table_snapshot> tables_;
  std::vector<piece> pieces_;
  uint64_t ticket_ = 0;
  std::vector<bool> fetched_;
  size_t left_ = 0;
};

} // namespace troupe
