#include "actors/net/bulk_client.hpp"

#include <poll.h>

#include "actors/net/wire_limits.hpp"

namespace troupe {

using namespace bulk;

std::unique_ptr<bulk_link> bulk_link::open(const std::string& host, uint16_t port, uint64_t run,
                                           uint64_t ticket, const std::string& label,
                                           deadline until, maybe_failure& error,
                                           const tls_context* tls) {
  int32_t shard = -1;
  auto ch = open_ticketed(host, port, tls, {run, ticket, label}, until, shard, error);
  if (!ch)
    return nullptr;
  return std::unique_ptr<bulk_link>(
    new bulk_link(std::move(ch), frame_limits{max_wire_elements(), max_frame_bytes()}, shard));
}

// The reply each request kind gets: a push's push_reply, a pull_reply for
// the rest.
static frame_kind reply_to(frame_kind kind) {
  return kind == frame_kind::push ? frame_kind::push_reply : frame_kind::pull_reply;
}

void bulk_link::begin(frame_kind kind, const meta_writer& meta, const tensor_refs& data,
                      std::vector<tensor> storage) {
  // The hello was request 0; the requests after it are numbered on.
  auto number = ++next_number_;
  frame_writer frame{kind, number, meta, data};
  if (!asking_) { // a new exchange
    asking_ = true;
    requests_.clear();
    reading_ = 0;
    out_ = std::move(frame);
    in_.next();
    in_.lend(std::move(storage));
    requests_.push_back({reply_to(kind), number, {}, std::nullopt, false, 0});
  } else {
    out_.append(std::move(frame));
    requests_.push_back({reply_to(kind), number, std::move(storage), std::nullopt, false, 0});
  }
  done_ = false;
  if (broken_)
    fail(
      {errc::training_stopped, "bulk connection to ps:" + std::to_string(shard_) + " is broken"});
}

namespace {

// The tables of a request: their count and ids in the meta section.
void write_tables(meta_writer& meta, const std::vector<bulk_link::table_part>& tables) {
  meta.i32(static_cast<int32_t>(tables.size()));
  for (auto& t : tables)
    meta.i32(t.table);
}

} // namespace

void bulk_link::start_pull(uint64_t run, const std::vector<std::string>& names,
                           const std::vector<table_part>& tables, std::vector<tensor> storage,
                           wire_precision precision) {
  tensor_refs data;
  for (auto& t : tables)
    data.push_back(t.keys);
  meta_writer meta{data};
  meta.u64(run).names(names).i32(static_cast<int32_t>(precision));
  write_tables(meta, tables);
  begin(frame_kind::pull, meta, data, std::move(storage));
}

void bulk_link::start_fetch(uint64_t run, uint64_t ticket, int32_t index,
                            std::vector<tensor> storage) {
  meta_writer meta;
  meta.u64(run).u64(ticket).i32(index);
  begin(frame_kind::fetch, meta, {}, std::move(storage));
}

void bulk_link::start_push(uint64_t run, int32_t worker, int64_t step, uint64_t proof,
                           const std::vector<std::string>& names,
                           const std::vector<tensor>& gradients,
                           const std::vector<table_part>& tables, int32_t wire_code) {
  auto data = refs_of(&gradients);
  for (auto& t : tables) {
    data.push_back(t.keys);
    data.push_back(t.counts);
    data.push_back(t.gradients);
  }
  meta_writer meta{data};
  meta.u64(run).i32(worker).i64(step).u64(proof).i32(wire_code).names(names);
  write_tables(meta, tables);
  begin(frame_kind::push, meta, data);
}

const maybe_failure& bulk_link::error(size_t i) const noexcept {
  static const maybe_failure none;
  return i < requests_.size() ? requests_[i].error : none;
}

bool bulk_link::lost(size_t i) const noexcept {
  return i < requests_.size() && requests_[i].lost;
}

int64_t bulk_link::version(size_t i) const noexcept {
  return i < requests_.size() ? requests_[i].version : 0;
}

uint64_t bulk_link::receipt(size_t i) const noexcept {
  return i < requests_.size() ? requests_[i].receipt : 0;
}

std::vector<tensor>& bulk_link::values(size_t i) {
  return requests_.at(i).values;
}

void bulk_link::fail(failure why) {
  for (size_t i = reading_; i < requests_.size(); ++i) {
    requests_[i].error = why;
    requests_[i].lost = true;
  }
  broken_ = true;
  done_ = true;
}

// The reply to request reading_ is in: its fields, or the shard's refusal.
// True once every request of the exchange is answered (or the link broke).
bool bulk_link::finish() {
  auto& asked = requests_[reading_];
  auto& head = in_.header();
  auto fields = in_.fields();
  auto kind = static_cast<frame_kind>(head.kind);
  asked.values = std::move(in_.tensors());
  if (head.request != asked.number) {
    fail({errc::invalid_request, "bulk reply to request " + std::to_string(head.request)
                                   + ", expected " + std::to_string(asked.number)});
    return true;
  }
  if (kind == frame_kind::refusal) {
    auto why = read_refusal(fields);
    if (!why) {
      fail({errc::invalid_request, "bulk frame: a malformed refusal"});
      return true;
    }
    asked.error = *why; // an answer: the connection goes on
  } else if (kind != asked.expected) {
    fail({errc::invalid_request, "bulk frame: a reply of kind " + std::to_string(head.kind)
                                   + " where " + std::to_string(static_cast<int>(asked.expected))
                                   + " was expected"});
    return true;
  } else {
    asked.version = fields.i64();
    if (kind == frame_kind::push_reply)
      asked.receipt = fields.u64();
    if (!fields.at_end() || (kind != frame_kind::pull_reply && !asked.values.empty())) {
      fail({errc::invalid_request, "bulk frame: a malformed reply"});
      return true;
    }
  }
  if (++reading_ == requests_.size()) {
    done_ = true;
    return true;
  }
  in_.next();
  in_.lend(std::move(requests_[reading_].values));
  return false;
}

short bulk_link::events() const noexcept {
  short wanted = POLLIN;
  if (!out_.done())
    wanted |= POLLOUT;
  return wanted;
}

bool bulk_link::progress(bool readable, bool writable) {
  asking_ = false;
  if (done_)
    return true;
  maybe_failure error;
  readable = readable || ch_.has_buffered();
  if (writable && !out_.done())
    out_.send_some(ch_, error);
  // The next reply may have come with this one: read on.
  while (!error && readable && in_.receive_some(ch_, error))
    if (finish())
      return true;
  if (error)
    fail(std::move(*error));
  return done_;
}

void complete_all(const std::vector<bulk_link*>& links, deadline until) {
  std::vector<pollfd> waiting;
  std::vector<size_t> open; // indices into links
  // Most frames leave in this first send.
  for (size_t i = 0; i < links.size(); ++i)
    if (!links[i]->progress(false, true))
      open.push_back(i);
  while (!open.empty()) {
    waiting.clear();
    bool buffered = false;
    for (auto i : open) {
      waiting.push_back({links[i]->fd(), links[i]->events(), 0});
      buffered = buffered || links[i]->has_buffered();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      for (auto i : open)
        links[i]->fail(
          {errc::training_stopped, "bulk connection to ps:" + std::to_string(links[i]->shard())
                                     + ": no reply before the deadline"});
      return;
    }
    auto ready = ::poll(waiting.data(), waiting.size(),
                        buffered ? 0
                                 : static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (ready < 0 || (ready == 0 && !buffered))
      continue;
    size_t kept = 0;
    for (size_t k = 0; k < open.size(); ++k) {
      auto events = waiting[k].revents;
      bool readable = events & (POLLIN | POLLHUP | POLLERR);
      bool writable = events & (POLLOUT | POLLERR);
      auto i = open[k];
      if (!links[i]->progress(readable, writable))
        open[kept++] = i;
    }
    open.resize(kept);
  }
}

} // namespace troupe
