#include "actors/chief/checkpoint_save.hpp"

namespace troupe {

void checkpoint_save::begin(const context& now, bool final, actions& out) {
  attempt_ = attempt{++attempts_, final, false, now.step, 0};
  out.began = now.step;
  if (final && !now.training) {
    request(now.step, out); // every step is in: the shards are still
  } else if (now.sync) {
    // The update after next: the shards cannot have passed it yet.
    if (now.step + 2 > now.last_step) {
      attempt_.reset(); // the final save is near
      if (final)
        out.final_over = true;
      return;
    }
    request(now.step + 2, out);
  } else {
    out.hold_grants = true; // the actor reports the fence once it is reached
  }
}

void checkpoint_save::request(int64_t version, actions& out) {
  attempt_->requested = true;
  attempt_->version = version;
  attempt_->answered = 0;
  out.request_copies = version;
}

void checkpoint_save::final_ended(const std::string& error, actions& out) {
  if (!error.empty())
    final_error_ = error;
  final_wanted_ = false;
  out.final_over = true;
}

checkpoint_save::actions checkpoint_save::begin_periodic(const context& now) {
  actions out;
  if (!attempt_ && now.training)
    begin(now, false, out);
  return out;
}

checkpoint_save::actions checkpoint_save::want_final(const context& now) {
  actions out;
  if (!attempt_) {
    if (last_saved_ == now.step)
      out.final_over = true; // the latest checkpoint holds the final state already
    else
      begin(now, true, out);
    return out;
  }
  if (attempt_->final)
    return out; // under way: it ends in final_over
  if (attempt_->requested && attempt_->version == now.step) {
    attempt_->final = true; // this one already holds the final state
    return out;
  }
  if (attempt_->requested) {
    final_wanted_ = true; // after the copies under way are written
    return out;
  }
  attempt_.reset(); // a fence that the end overtook (the grants stay held)
  begin(now, true, out);
  return out;
}

checkpoint_save::actions checkpoint_save::fence_reached(int64_t step) {
  actions out;
  if (attempt_ && !attempt_->requested)
    request(step, out);
  return out;
}

checkpoint_save::actions checkpoint_save::copy_arrived(uint64_t id, size_t parts) {
  actions out;
  if (!attempt_ || attempt_->id != id || !attempt_->requested)
    return out;
  if (++attempt_->answered < parts)
    return out;
  out.resume_grants = !attempt_->final; // a final save's stop follows: no more steps
  out.write = attempt_->version;
  return out;
}

checkpoint_save::actions checkpoint_save::copy_failed(uint64_t id, const std::string& why) {
  actions out;
  if (!attempt_ || attempt_->id != id)
    return out;
  out.abandoned = "checkpoint at step " + std::to_string(attempt_->version) + " abandoned: " + why;
  bool final = attempt_->final;
  attempt_.reset();
  out.resume_grants = true;
  if (final)
    final_ended(why, out);
  return out;
}

checkpoint_save::actions checkpoint_save::written(const context& now, int64_t step, bool ok,
                                                  const std::string& what) {
  actions out;
  if (!attempt_ || attempt_->version != step)
    return out;
  bool final = attempt_->final;
  attempt_.reset();
  if (ok)
    last_saved_ = step;
  if (final) {
    final_ended(ok ? std::string() : what, out);
    return out;
  }
  if (final_wanted_) {
    final_wanted_ = false;
    begin(now, true, out);
  }
  return out;
}

} // namespace troupe
