#pragma once
// One-use tickets that open a connection (the bulk path's, the report
// channel's): a random 64-bit number handed out over BASP, redeemed once by
// the connection that shows it, and forgotten unused after a minute (at
// most 4096 outstanding: a peer asking without end only displaces the
// oldest). Each ticket names who may use the connection it opens. Free of
// CAF; thread-safe.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>

namespace troupe {

/// A nonzero 64-bit number from the system's entropy: a ticket, a key.
inline uint64_t draw_secret() {
  std::random_device entropy;
  uint64_t v = 0;
  while (v == 0)
    v = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  return v;
}

template <class Holder>
class ticket_book {
public:
  static constexpr auto life = std::chrono::minutes(1);
  static constexpr size_t max_open = 4096;

  /// A fresh ticket for `to`.
  uint64_t issue(Holder to) {
    auto now = clock::now();
    std::lock_guard<std::mutex> guard{mutex_};
    for (auto it = tickets_.begin(); it != tickets_.end();)
      it = now - it->second.issued > life ? tickets_.erase(it) : std::next(it);
    if (tickets_.size() >= max_open)
      tickets_.erase(std::min_element(tickets_.begin(), tickets_.end(), [](auto& a, auto& b) {
        return a.second.issued < b.second.issued;
      }));
    uint64_t ticket = draw_secret();
    while (tickets_.count(ticket) > 0)
      ticket = draw_secret();
    tickets_[ticket] = {std::move(to), now};
    return ticket;
  }

  /// Takes `ticket` out of the book: whom it was issued to; nullopt for a
  /// ticket never issued, shown before, or expired.
  std::optional<Holder> redeem(uint64_t ticket) {
    std::lock_guard<std::mutex> guard{mutex_};
    auto it = tickets_.find(ticket);
    if (it == tickets_.end() || clock::now() - it->second.issued > life)
      return std::nullopt;
    auto to = std::move(it->second.to);
    tickets_.erase(it);
    return to;
  }

private:
  using clock = std::chrono::steady_clock;
  struct entry {
    Holder to;
    clock::time_point issued;
  };
  std::mutex mutex_;
  std::map<uint64_t, entry> tickets_;
};

} // namespace troupe
