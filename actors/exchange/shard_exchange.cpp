#include "actors/exchange/shard_exchange.hpp"

namespace troupe {

namespace {

bool pushes(exchange_kind kind) {
  return kind == exchange_kind::push || kind == exchange_kind::push_then_pull;
}

bool pulls(exchange_kind kind) {
  return kind == exchange_kind::pull || kind == exchange_kind::push_then_pull;
}

size_t dense_count(const exchange_part& part) {
  return part.names ? part.names->size() : 0;
}

const std::vector<std::string>& names_of(const exchange_part& part) {
  static const std::vector<std::string> none;
  return part.names ? *part.names : none;
}

// A part's request as a message: the keys and counts out of their bits,
// the gradients moved (the message owns them).
pull_request pull_message(const push_header& header, const exchange_part& part) {
  pull_request out{header.run, names_of(part), static_cast<int32_t>(header.precision), {}};
  for (auto& rows : part.rows) {
    out.tables.push_back({rows.table, {}});
    bulk::keys_of(rows.keys, out.tables.back().keys);
  }
  return out;
}

step_push push_message(const push_header& header, exchange_part& part) {
  step_push out{header.run,
                header.worker,
                header.step,
                header.proof,
                push_wire_code(header),
                names_of(part),
                std::move(part.gradients),
                {}};
  for (auto& rows : part.rows) {
    step_rows message;
    message.table = rows.table;
    bulk::keys_of(rows.keys, message.keys);
    bulk::counts_of(rows.counts, message.keys.size(), message.counts);
    message.grads = std::move(rows.gradients);
    out.tables.push_back(std::move(message));
  }
  return out;
}

std::vector<bulk_link::table_part> link_tables(const exchange_part& part) {
  std::vector<bulk_link::table_part> out;
  for (auto& rows : part.rows)
    out.push_back({rows.table, &rows.keys, &rows.counts, &rows.gradients});
  return out;
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

// Each part's requests go on its shard's one path, in the order the shard
// must take them (a push before the pull that must see it applied).
void shard_exchange::start(exchange_kind kind, const push_header& header,
                           std::vector<exchange_part> parts, bool in_background) {
  cancel(); // an exchange not finished is void
  ++epoch_;
  active_ = true;
  kind_ = kind;
  parts_ = std::move(parts);
  outcomes_.assign(parts_.size(), {});
  bulk_.clear();
  for (size_t i = 0; i < parts_.size(); ++i) {
    auto shard = static_cast<size_t>(parts_[i].shard);
    if (has_link(parts_[i].shard)) {
      bulk_.push_back({i, links_[shard].get()});
      ask_link(kind, header, bulk_.back());
    } else {
      ask_basp(kind, header, i);
    }
  }
  drive_links(in_background);
}

void shard_exchange::ask_link(exchange_kind kind, const push_header& header, bulk_part& b) {
  auto& part = parts_[b.index];
  int asked = 0;
  if (pushes(kind)) {
    b.link->start_push(header.run, header.worker, header.step, header.proof, names_of(part),
                       part.gradients, link_tables(part), push_wire_code(header));
    b.push = asked++;
  }
  if (pulls(kind)) {
    auto storage = pull_storage(part);
    for (auto& rows : part.rows) // each table's rows after the values
      storage.push_back(rows.storage.empty() ? tensor{} : std::move(rows.storage.front()));
    b.link->start_pull(header.run, names_of(part), link_tables(part), std::move(storage),
                       header.precision);
    b.pull = asked++;
  }
  if (kind == exchange_kind::fetch) {
    b.link->start_fetch(header.run, part.copy.ticket, part.copy.index, std::move(part.storage));
    b.pull = asked++;
  }
}

void shard_exchange::ask_basp(exchange_kind kind, const push_header& header, size_t i) {
  auto& part = parts_[i];
  auto pulled = [this, epoch = epoch_, i](pull_reply& reply, const maybe_failure& refused,
                                          const std::optional<std::string>& lost) {
    if (epoch != epoch_)
      return;
    auto& out = outcomes_[i];
    if (refused) // a pull's refusal is a loss too: the step cannot go on without it
      out.lost = refused->message;
    else if (lost)
      out.lost = lost;
    else {
      out.values = std::move(reply.values);
      out.rows = std::move(reply.rows);
    }
    basp_reply();
  };
  if (pushes(kind)) {
    ++pending_;
    basp_.push(part.shard, push_message(header, part),
               [this, epoch = epoch_, i](const push_receipt& answer, const maybe_failure& refused,
                                         const std::optional<std::string>& lost) {
                 if (epoch != epoch_)
                   return;
                 auto& out = outcomes_[i];
                 out.refused = refused;
                 out.lost = lost;
                 out.receipt = answer.receipt;
                 basp_reply();
               });
  }
  if (pulls(kind)) {
    ++pending_;
    basp_.pull(part.shard, pull_message(header, part), pulled);
  }
  if (kind == exchange_kind::fetch) {
    ++pending_;
    basp_.fetch(part.shard, header.run, part.copy, pulled);
  }
}

void shard_exchange::drive_links(bool in_background) {
  if (bulk_.empty())
    return;
  std::vector<bulk_link*> links;
  bool two_requests = false; // on some link: its deadline covers both
  for (auto& b : bulk_) {
    links.push_back(b.link);
    two_requests = two_requests || (b.push >= 0 && b.pull >= 0);
  }
  auto within = two_requests ? 2 * timeout_ : timeout_;
  if (!in_background) {
    complete_all(links, std::chrono::steady_clock::now() + within);
    return;
  }
  if (!runner_)
    runner_ = std::make_unique<background_exchange>();
  runner_->start(std::move(links), within);
}

std::vector<tensor> shard_exchange::pull_storage(exchange_part& part) {
  auto storage = std::move(part.storage);
  auto& spare = spare_[static_cast<size_t>(part.shard)];
  storage.resize(dense_count(part));
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
    auto& part = parts_[b.index];
    if (b.push >= 0) {
      auto r = static_cast<size_t>(b.push);
      out.gradients = std::move(part.gradients);
      if (const auto& error = link.error(r)) {
        if (link.lost(r))
          out.lost = error->message;
        else
          out.refused = error;
      } else {
        out.receipt = link.receipt(r);
      }
    }
    if (b.pull >= 0) {
      auto r = static_cast<size_t>(b.pull);
      // A pull's refusal is a loss too: the step cannot go on without it.
      if (const auto& error = link.error(r)) {
        out.lost = error->message;
      } else {
        auto& got = link.values(r);
        auto dense = kind_ == exchange_kind::fetch ? got.size() : dense_count(part);
        out.values.assign(
          std::make_move_iterator(got.begin()),
          std::make_move_iterator(got.begin()
                                  + static_cast<std::ptrdiff_t>(std::min(dense, got.size()))));
        for (size_t k = dense; k < got.size(); ++k)
          out.rows.push_back(std::move(got[k]));
      }
      if (out.lost)
        out.refused.reset(); // a push_then_pull's push: the loss is what counts
    }
    if (link.broken())
      links_[static_cast<size_t>(part.shard)].reset();
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
