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
  return kind == exchange_kind::push || kind == exchange_kind::push_then_pull
         || kind == exchange_kind::push_rows;
}

// What brings values back: pulls and fetches.
bool pulls(exchange_kind kind) {
  return kind != exchange_kind::push && kind != exchange_kind::push_rows;
}

// Where a shard's refusal is an answer the caller acts on rather than a
// loss to recover from: pushes, and pulls of rows (too many keys, say).
bool refusal_answers(exchange_kind kind) {
  return !pulls(kind) || kind == exchange_kind::pull_rows;
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

// Each shard gets the push before the pull (BASP keeps the order of one
// sender's messages to one receiver): the pull sees the push applied.
void shard_exchange::start_basp(exchange_kind kind, const push_header& header) {
  auto epoch = epoch_;
  for (size_t i = 0; i < parts_.size(); ++i) {
    auto& part = parts_[i];
    if (has_link(part.shard))
      continue;
    if (kind == exchange_kind::pull_rows || kind == exchange_kind::push_rows) {
      start_basp_rows(kind, header, i);
      continue;
    }
    if (pushes(kind)) {
      ++pending_;
      basp_.push(
        part.shard, header, *part.names, std::move(part.gradients),
        [this, epoch, i](const maybe_failure& refused, const std::optional<std::string>& lost) {
          if (epoch != epoch_)
            return;
          outcomes_[i].refused = refused;
          if (lost)
            outcomes_[i].lost = lost;
          basp_reply();
        });
    }
    if (!pulls(kind))
      continue;
    ++pending_;
    auto done = [this, epoch, i](std::vector<tensor>& values, const maybe_failure& refused,
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
}

void shard_exchange::start_basp_rows(exchange_kind kind, const push_header& header, size_t i) {
  auto& part = parts_[i];
  ++pending_;
  auto epoch = epoch_;
  if (kind == exchange_kind::push_rows) {
    std::vector<uint32_t> counts;
    bulk::counts_of(part.counts, static_cast<size_t>(part.keys.dim(0)), counts);
    basp_.push_rows(
      part.shard, header, part.table, keys_in(part.keys), std::move(counts),
      std::move(part.gradients.at(0)),
      [this, epoch, i](const maybe_failure& refused, const std::optional<std::string>& lost) {
        if (epoch != epoch_)
          return;
        outcomes_[i].refused = refused;
        outcomes_[i].lost = lost;
        basp_reply();
      });
    return;
  }
  basp_.pull_rows(part.shard, header.run, part.table, keys_in(part.keys),
                  [this, epoch, i](std::vector<tensor>& values, const maybe_failure& refused,
                                   const std::optional<std::string>& lost) {
                    if (epoch != epoch_)
                      return;
                    outcomes_[i].refused = refused;
                    outcomes_[i].lost = lost;
                    if (!refused && !lost)
                      outcomes_[i].values = std::move(values);
                    basp_reply();
                  });
}

void shard_exchange::start_bulk(exchange_kind kind, const push_header& header, bool in_background) {
  if (bulk_.empty())
    return;
  std::vector<bulk_link*> links;
  for (auto& b : bulk_) {
    auto& part = parts_[b.index];
    if (kind == exchange_kind::push_rows)
      b.link->start_push_rows(header.run, header.worker, header.step, header.proof, part.table,
                              {&part.keys, &part.counts, &part.gradients.at(0)});
    else if (kind == exchange_kind::pull_rows)
      b.link->start_pull_rows(header.run, part.table, part.keys, std::move(part.storage));
    else if (pushes(kind))
      b.link->start_push(header.run, header.worker, header.step, header.proof, *part.names,
                         part.gradients, push_wire_code(header));
    else if (kind == exchange_kind::fetch)
      b.link->start_fetch(header.run, part.copy.ticket, part.copy.index, std::move(part.storage));
    else
      b.link->start_pull(header.run, *part.names, pull_storage(part), header.precision);
    links.push_back(b.link);
  }
  // A push then a pull: each link's pull starts as soon as its push is
  // answered. On the runner's thread this touches only the bulk parts'
  // outcomes and storage, which the caller leaves alone until finish().
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
    if (pushes(kind_))
      out.gradients = std::move(parts_[b.index].gradients);
    if (const auto& error = link.error()) {
      if (link.broken() || !refusal_answers(kind_))
        out.lost = error->message;
      else
        out.refused = error;
    } else if (pulls(kind_)) {
      out.values = std::move(link.values());
    }
    if (link.broken()) {
      out.refused.reset(); // the loss is what counts
      links_[static_cast<size_t>(parts_[b.index].shard)].reset();
    }
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
