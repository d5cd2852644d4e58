#include "actors/exchange/shard_exchange.hpp"

namespace troupe {

void message_path::pull_rows(int32_t, uint64_t, int32_t, std::vector<int64_t>, pull_done done) {
  std::vector<tensor> none;
  done(none, std::nullopt, std::string("this message path carries no embedding rows"));
}

void message_path::push_rows(int32_t, const push_header&, int32_t, std::vector<int64_t>,
                             std::vector<uint32_t>, tensor, push_done done) {
  done(std::nullopt, std::string("this message path carries no embedding rows"));
}

namespace {

bool pushes(exchange_kind kind) {
  return kind == exchange_kind::push || kind == exchange_kind::push_then_pull;
}

// What brings values back: pulls and fetches.
bool pulls(exchange_kind kind) {
  return kind != exchange_kind::push;
}

bool carries_rows(const exchange_part& part) {
  return part.table >= 0;
}

// A part with dense values to move (a fetch's tensor counts as one).
bool carries_dense(exchange_kind kind, const exchange_part& part) {
  return kind == exchange_kind::fetch || part.names;
}

std::vector<int64_t> keys_in(const tensor& bits) {
  std::vector<int64_t> keys;
  bulk::keys_of(bits, keys);
  return keys;
}

} // namespace

shard_exchange::shard_exchange(message_path& basp, std::chrono::milliseconds timeout)
  : basp_(basp), timeout_(timeout) {
}

shard_exchange::~shard_exchange() {
  cancel();
}

void shard_exchange::reset_links(size_t shards) {
  cancel();
  links_.clear();
  links_.resize(shards);
  spare_.clear();
  spare_.resize(shards);
}

void shard_exchange::set_link(int32_t shard, std::unique_ptr<bulk_link> link) {
  links_.at(static_cast<size_t>(shard)) = std::move(link);
}

bool shard_exchange::has_link(int32_t shard) const {
  auto s = static_cast<size_t>(shard);
  return s < links_.size() && links_[s];
}

void shard_exchange::start(exchange_kind kind, const push_header& header,
                           std::vector<exchange_part> parts, bool in_background) {
  cancel(); // an exchange not finished is void
  ++epoch_;
  active_ = true;
  kind_ = kind;
  parts_ = std::move(parts);
  outcomes_.assign(parts_.size(), {});
  bulk_.clear();
  for (size_t i = 0; i < parts_.size(); ++i)
    if (has_link(parts_[i].shard))
      bulk_.push_back({i, links_[static_cast<size_t>(parts_[i].shard)].get()});
  start_basp(kind, header);
  start_bulk(kind, header, in_background);
}

// Each shard gets the push before the pull, and a push's rows before its
// dense gradients (BASP keeps the order of one sender's messages to one
// receiver): the pull sees the push applied, and a sync step holds the
// rows before the dense gradient can complete it.
void shard_exchange::start_basp(exchange_kind kind, const push_header& header) {
  for (size_t i = 0; i < parts_.size(); ++i) {
    auto& part = parts_[i];
    if (has_link(part.shard))
      continue;
    if (kind == exchange_kind::push && carries_rows(part))
      push_basp_rows(header, i);
    if (pushes(kind) && carries_dense(kind, part))
      push_basp(header, i);
    if (pulls(kind) && carries_dense(kind, part))
      pull_basp(kind, header, i);
    if (kind == exchange_kind::pull && carries_rows(part))
      pull_basp_rows(header, i);
  }
}

void shard_exchange::push_basp(const push_header& header, size_t i) {
  auto& part = parts_[i];
  ++pending_;
  basp_.push(part.shard, header, *part.names, std::move(part.gradients),
             [this, epoch = epoch_, i](const maybe_failure& refused,
                                       const std::optional<std::string>& lost) {
               if (epoch != epoch_)
                 return;
               outcomes_[i].refused = refused;
               if (lost)
                 outcomes_[i].lost = lost;
               basp_reply();
             });
}

void shard_exchange::pull_basp(exchange_kind kind, const push_header& header, size_t i) {
  auto& part = parts_[i];
  ++pending_;
  auto done = [this, epoch = epoch_, i](std::vector<tensor>& values, const maybe_failure& refused,
                                        const std::optional<std::string>& lost) {
    if (epoch != epoch_)
      return;
    if (refused)
      outcomes_[i].lost = refused->message;
    else if (lost)
      outcomes_[i].lost = lost;
    else
      outcomes_[i].values = std::move(values);
    basp_reply();
  };
  if (kind == exchange_kind::fetch)
    basp_.fetch(part.shard, header.run, part.copy, std::move(done));
  else
    basp_.pull(part.shard, header.run, *part.names, header.precision, std::move(done));
}

void shard_exchange::push_basp_rows(const push_header& header, size_t i) {
  auto& part = parts_[i];
  ++pending_;
  std::vector<uint32_t> counts;
  bulk::counts_of(part.counts, static_cast<size_t>(part.keys.dim(0)), counts);
  basp_.push_rows(part.shard, header, part.table, keys_in(part.keys), std::move(counts),
                  std::move(part.row_gradients),
                  [this, epoch = epoch_, i](const maybe_failure& refused,
                                            const std::optional<std::string>& lost) {
                    if (epoch != epoch_)
                      return;
                    outcomes_[i].rows.refused = refused;
                    outcomes_[i].rows.lost = lost;
                    basp_reply();
                  });
}

void shard_exchange::pull_basp_rows(const push_header& header, size_t i) {
  auto& part = parts_[i];
  ++pending_;
  basp_.pull_rows(part.shard, header.run, part.table, keys_in(part.keys),
                  [this, epoch = epoch_, i](std::vector<tensor>& values,
                                            const maybe_failure& refused,
                                            const std::optional<std::string>& lost) {
                    if (epoch != epoch_)
                      return;
                    auto& rows = outcomes_[i].rows;
                    rows.refused = refused;
                    rows.lost = lost;
                    if (!refused && !lost)
                      rows.values = std::move(values);
                    basp_reply();
                  });
}

// A push's rows go before its dense gradients, a pull's dense values before
// its rows; the shard answers them in that order.
void shard_exchange::ask_bulk(exchange_kind kind, const push_header& header, bulk_part& b) {
  auto& part = parts_[b.index];
  int asked = 0;
  if (kind == exchange_kind::push && carries_rows(part)) {
    b.link->start_push_rows(header.run, header.worker, header.step, header.proof, part.table,
                            {&part.keys, &part.counts, &part.row_gradients});
    b.rows = asked++;
  }
  if (carries_dense(kind, part)) {
    if (pushes(kind))
      b.link->start_push(header.run, header.worker, header.step, header.proof, *part.names,
                         part.gradients, push_wire_code(header));
    else if (kind == exchange_kind::fetch)
      b.link->start_fetch(header.run, part.copy.ticket, part.copy.index, std::move(part.storage));
    else
      b.link->start_pull(header.run, *part.names, pull_storage(part), header.precision);
    b.dense = asked++;
  }
  if (kind == exchange_kind::pull && carries_rows(part)) {
    b.link->start_pull_rows(header.run, part.table, part.keys, std::move(part.row_storage));
    b.rows = asked++;
  }
}

void shard_exchange::start_bulk(exchange_kind kind, const push_header& header, bool in_background) {
  if (bulk_.empty())
    return;
  std::vector<bulk_link*> links;
  bool two_requests = false; // on some link: its deadline covers both
  for (auto& b : bulk_) {
    ask_bulk(kind, header, b);
    links.push_back(b.link);
    two_requests = two_requests || (b.dense >= 0 && b.rows >= 0);
  }
  // A push then a pull: each link's pull starts as soon as its push is
  // answered (dense values only: no rows ride in this kind). On the
  // runner's thread this touches only the bulk parts' outcomes and storage,
  // which the caller leaves alone until finish().
  then_on_link then;
  auto within = timeout_;
  if (kind == exchange_kind::push_then_pull) {
    within = 2 * timeout_;
    then = [this, run = header.run, precision = header.precision,
            pulling = std::vector<bool>(bulk_.size())](size_t i) mutable {
      if (pulling[i])
        return false;
      auto& b = bulk_[i];
      outcomes_[b.index].refused = b.link->error();
      if (b.link->broken())
        return false;
      b.link->start_pull(run, *parts_[b.index].names, pull_storage(parts_[b.index]), precision);
      pulling[i] = true;
      return true;
    };
  } else if (two_requests) {
    within = 2 * timeout_;
  }
  if (!in_background) {
    complete_all(links, std::chrono::steady_clock::now() + within, then);
    return;
  }
  if (!runner_)
    runner_ = std::make_unique<background_exchange>();
  runner_->start(std::move(links), within, std::move(then));
}

std::vector<tensor> shard_exchange::pull_storage(exchange_part& part) {
  auto storage = std::move(part.storage);
  auto& spare = spare_[static_cast<size_t>(part.shard)];
  storage.resize(part.names->size());
  for (size_t k = 0; k < storage.size() && k < spare.size(); ++k)
    if (storage[k].size() == 0)
      storage[k] = std::move(spare[k]);
  spare.clear();
  return storage;
}

void shard_exchange::basp_reply() {
  if (--pending_ == 0 && done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    finish(std::move(done));
  }
}

void shard_exchange::finish(finished done) {
  if (!active_) {
    std::vector<part_outcome> none;
    done(none);
    return;
  }
  if (pending_ > 0) {
    done_ = std::move(done);
    return;
  }
  collect_bulk();
  active_ = false;
  auto outcomes = std::move(outcomes_);
  parts_.clear();
  bulk_.clear();
  done(outcomes);
}

// The bulk parts' outcomes, once their exchanges are over. A broken link is
// dropped: the next plan opens a new one.
void shard_exchange::collect_bulk() {
  if (runner_)
    runner_->wait();
  for (auto& b : bulk_) {
    auto& out = outcomes_[b.index];
    auto& link = *b.link;
    if (b.dense >= 0) {
      auto d = static_cast<size_t>(b.dense);
      if (pushes(kind_))
        out.gradients = std::move(parts_[b.index].gradients);
      // A pull's refusal is a loss too: the step cannot go on without it.
      if (const auto& error = link.error(d)) {
        if (link.lost(d) || pulls(kind_))
          out.lost = error->message;
        else
          out.refused = error;
      } else if (pulls(kind_)) {
        out.values = std::move(link.values(d));
      }
      if (out.lost)
        out.refused.reset(); // a push_then_pull's push: the loss is what counts
    }
    if (b.rows >= 0) {
      auto r = static_cast<size_t>(b.rows);
      if (const auto& error = link.error(r)) {
        if (link.lost(r))
          out.rows.lost = error->message;
        else
          out.rows.refused = error;
      } else if (kind_ == exchange_kind::pull) {
        out.rows.values = std::move(link.values(r));
      }
    }
    if (link.broken())
      links_[static_cast<size_t>(parts_[b.index].shard)].reset();
  }
}

void shard_exchange::cancel() {
  if (runner_)
    runner_->cancel();
  ++epoch_;
  active_ = false;
  pending_ = 0;
  done_ = nullptr;
  parts_.clear();
  outcomes_.clear();
  bulk_.clear();
  for (auto& link : links_)
    if (link && link->broken())
      link.reset();
}

void shard_exchange::give_back(int32_t shard, std::vector<tensor> storage) {
  auto s = static_cast<size_t>(shard);
  if (s < spare_.size() && links_[s])
    spare_[s] = std::move(storage);
}

} // namespace troupe
