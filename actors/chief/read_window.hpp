#pragma once
// How many pieces of checkpoint files the chief's checkpoint source has
// sent and not yet seen arrive, per follower and in all, without CAF. A
// piece answered over BASP waits in the chief's buffers until its follower
// reads it; a follower that asks for a thousand at once (or never reads)
// held 2.4 GB of them. Each piece carries a token that only its follower
// receives, and the follower shows the token of the last piece it got with
// its next read: that piece and every one before it (one connection
// delivers in order) have left the chief. A read beyond the window is
// refused, so the chief holds at most `in_all` pieces, whatever a follower
// claims.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>

namespace troupe {

template <class Follower>
class read_window {
public:
  read_window(size_t per_follower, size_t in_all) : per_follower_(per_follower), in_all_(in_all) {}

  /// A read by `follower` that shows `token` (0: none): the pieces up to
  /// that one arrived. Then `fresh` (never 0) is the new piece's token, or
  /// the read is refused (false) when the follower or everyone has as many
  /// pieces on the way as the window allows.
  bool admit(const Follower& follower, uint64_t token, uint64_t fresh) {
    auto& sent = sent_[follower];
    arrived(sent, token);
    if (sent.size() >= per_follower_ || in_flight_ >= in_all_) {
      if (sent.empty())
        sent_.erase(follower);
      return false;
    }
    sent.push_back(fresh);
    ++in_flight_;
    return true;
  }

  /// The follower went: what it had on the way is dropped with its connection.
  void forget(const Follower& follower) {
    auto at = sent_.find(follower);
    if (at == sent_.end())
      return;
    in_flight_ -= at->second.size();
    sent_.erase(at);
  }

  size_t in_flight() const noexcept { return in_flight_; }
  size_t per_follower() const noexcept { return per_follower_; }
  size_t in_all() const noexcept { return in_all_; }

private:
  void arrived(std::deque<uint64_t>& sent, uint64_t token) {
    if (token == 0)
      return;
    for (size_t i = 0; i < sent.size(); ++i)
      if (sent[i] == token) {
        sent.erase(sent.begin(), sent.begin() + static_cast<std::ptrdiff_t>(i + 1));
        in_flight_ -= i + 1;
        return;
      }
  }

  size_t per_follower_;
  size_t in_all_;
  size_t in_flight_ = 0;
  std::map<Follower, std::deque<uint64_t>> sent_;
};

} // namespace troupe
