#include "actors/chief/checkpoint_source.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <caf/typed_event_based_actor.hpp>

#include "actors/chief/read_window.hpp"
#include "actors/net/ticket_book.hpp"
#include "tensor/checkpoint/checkpoint.hpp"

namespace fs = std::filesystem;

namespace troupe {

namespace {

constexpr const char* card_file = "model.json";
constexpr size_t max_listed_files = 4096;

[[noreturn]] void fail(const std::string& what) {
  throw checkpoint_error(what);
}

// "ckpt-<step>/<file>" with one plain file name, or model.json.
bool plain_name(const std::string& name, int64_t step) {
  if (name == card_file)
    return true;
  auto dir = "ckpt-" + std::to_string(step) + "/";
  if (name.rfind(dir, 0) != 0)
    return false;
  auto file = name.substr(dir.size());
  return !file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos
         && file.find('\0') == std::string::npos;
}

} // namespace

checkpoint_listing checkpoint_catalog::listing_of(int64_t step, const std::string& path) const {
  checkpoint_listing out;
  out.step = step;
  std::error_code ec;
  auto card = fs::path(log_dir_) / card_file;
  if (fs::is_regular_file(card, ec)) {
    out.files.push_back(card_file);
    out.sizes.push_back(fs::file_size(card, ec));
  }
  std::vector<std::pair<std::string, uint64_t>> files;
  for (auto& entry : fs::directory_iterator(path, ec))
    if (entry.is_regular_file(ec))
      files.emplace_back(fs::path(path).filename().string() + "/"
                           + entry.path().filename().string(),
                         entry.file_size(ec));
  if (ec)
    fail(path + ": cannot list it: " + ec.message());
  std::sort(files.begin(), files.end());
  for (auto& [name, size] : files) {
    out.files.push_back(name);
    out.sizes.push_back(size);
  }
  return out;
}

checkpoint_listing checkpoint_catalog::newest_after(int64_t step) const {
  for (auto& path : checkpoint_dir(log_dir_).complete()) {
    auto found = checkpoint_step_of(fs::path(path).filename().string());
    if (found <= step)
      break;
    return listing_of(found, path);
  }
  return {};
}

std::string checkpoint_catalog::read(int64_t step, const std::string& name, uint64_t offset,
                                     uint64_t max_bytes) const {
  if (step < 0 || !plain_name(name, step))
    fail("'" + name + "' is not a file of checkpoint " + std::to_string(step));
  auto complete = checkpoint_dir(log_dir_).complete();
  auto dir = std::find_if(complete.begin(), complete.end(), [step](const std::string& path) {
    return checkpoint_step_of(fs::path(path).filename().string()) == step;
  });
  if (dir == complete.end())
    fail("no complete checkpoint of step " + std::to_string(step)
         + " (deleted by checkpoint.keep meanwhile?)");
  auto listing = listing_of(step, *dir);
  if (std::find(listing.files.begin(), listing.files.end(), name) == listing.files.end())
    fail("checkpoint " + std::to_string(step) + " has no file '" + name
         + "' (deleted by checkpoint.keep meanwhile?)");
  std::ifstream in(fs::path(log_dir_) / name, std::ios::binary);
  if (!in)
    fail("cannot open " + name + " of checkpoint " + std::to_string(step));
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(static_cast<size_t>(std::min(max_bytes, checkpoint_chunk_bytes)), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return bytes;
}

checkpoint_fetcher::copy checkpoint_fetcher::fetch(const checkpoint_listing& listing,
                                                   const reader& read) const {
  auto step = std::to_string(listing.step);
  if (listing.step < 0 || listing.files.size() != listing.sizes.size()
      || listing.files.size() > max_listed_files)
    fail("checkpoint " + step + ": a malformed listing (" + std::to_string(listing.files.size())
         + " names, " + std::to_string(listing.sizes.size()) + " sizes)");
  uint64_t total = 0;
  for (size_t i = 0; i < listing.files.size(); ++i) {
    if (!plain_name(listing.files[i], listing.step))
      fail("checkpoint " + step + ": the listing names '" + listing.files[i]
           + "', not a file of that checkpoint");
    if (listing.sizes[i] > max_bytes_ || (total += listing.sizes[i]) > max_bytes_)
      fail("checkpoint " + step + ": the listing announces more than " + std::to_string(max_bytes_)
           + " bytes, far more than this model's checkpoint");
  }
  if (std::find(listing.files.begin(), listing.files.end(), card_file) == listing.files.end())
    fail("checkpoint " + step + ": the chief's log directory has no " + card_file);
  auto root = fs::path(local_dir_) / ("step-" + step);
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root / ("ckpt-" + step), ec);
  if (ec)
    fail(root.string() + ": cannot create it: " + ec.message());
  for (size_t i = 0; i < listing.files.size(); ++i) {
    auto& name = listing.files[i];
    std::ofstream out(root / name, std::ios::binary | std::ios::trunc);
    uint64_t got = 0;
    while (got < listing.sizes[i]) {
      auto bytes = read(name, got);
      if (bytes.empty() || got + bytes.size() > listing.sizes[i])
        fail("checkpoint " + step + ": " + name + " is not the listed "
             + std::to_string(listing.sizes[i]) + " bytes (rewritten meanwhile?)");
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      got += bytes.size();
    }
    if (!out.flush())
      fail((root / name).string() + ": cannot write it");
  }
  for (auto& entry : fs::directory_iterator(local_dir_, ec))
    if (entry.path() != root)
      fs::remove_all(entry.path(), ec);
  return {(root / ("ckpt-" + step)).string(), (root / card_file).string()};
}

// -- the actor ------------------------------------------------------------------

namespace {

constexpr size_t max_followers = 64;
// Pieces on their way to a follower, and to all: the chief's process holds
// at most this many replies (each up to 1 MiB, twice while serialised).
constexpr size_t pieces_per_follower = 2;
constexpr size_t pieces_in_all = 16;

struct checkpoint_source_state {
  static inline const char* name = "troupe.checkpoint_source";
  std::optional<checkpoint_catalog> catalog;
  std::set<caf::actor_addr> followers;
  read_window<caf::actor_addr> pieces{pieces_per_follower, pieces_in_all};
  bool over = false;
};

using source_ptr = checkpoint_source_actor::stateful_pointer<checkpoint_source_state>;

void quit_when_drained(source_ptr self) {
  if (self->state.over && self->state.followers.empty())
    self->quit();
}

// A piece of a listed file, for a follower that listed first and has
// room in the window of pieces on their way.
caf::result<checkpoint_chunk> on_read(source_ptr self, int64_t step, const std::string& name,
                                      uint64_t offset, uint64_t shown) {
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!sender || st.followers.count(sender) == 0)
    return refuse("checkpoint source", "a read of " + quote_input(name), self->current_sender(),
                  "only one of the followers (at most " + std::to_string(max_followers)
                    + ") that listed the checkpoints first reads them");
  checkpoint_chunk out;
  out.token = draw_secret();
  if (!st.pieces.admit(sender, shown, out.token))
    return make_error({errc::invalid_request,
                       "checkpoint source: a read beyond the pieces on their way (at most "
                         + std::to_string(st.pieces.per_follower()) + " a follower, "
                         + std::to_string(st.pieces.in_all())
                         + " in all): show the token of the last piece received, or wait for it"});
  try {
    out.bytes = st.catalog->read(step, name, offset, checkpoint_chunk_bytes);
  } catch (const checkpoint_error& e) {
    return make_error({errc::invalid_request, e.what()});
  }
  return out;
}

checkpoint_source_actor::behavior_type checkpoint_source(source_ptr self, std::string log_dir) {
  self->state.catalog.emplace(std::move(log_dir));
  self->set_down_handler([self](const caf::down_msg& down) {
    self->state.followers.erase(down.source);
    self->state.pieces.forget(down.source);
    quit_when_drained(self);
  });
  return {
    [self](ckpt_list_atom, int64_t after) -> caf::result<checkpoint_listing> {
      auto& st = self->state;
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      // Tracked (and waited for at the end) up to a bound: a stranger's
      // thousand actors must not hold the chief's process for long, nor grow it.
      if (sender && st.followers.size() < max_followers && st.followers.insert(sender).second)
        self->monitor(sender);
      try {
        auto listing = st.catalog->newest_after(after);
        listing.final = st.over;
        if (st.over && listing.step < 0) {
          st.followers.erase(sender); // told everything: it may go
          quit_when_drained(self);
        }
        return listing;
      } catch (const checkpoint_error& e) {
        return make_error({errc::invalid_request, e.what()});
      }
    },
    [self](ckpt_read_atom, int64_t step, const std::string& name, uint64_t offset, uint64_t shown)
      -> caf::result<checkpoint_chunk> { return on_read(self, step, name, offset, shown); },
    [self](stop_atom) {
      auto sender = self->current_sender();
      if (!sender || sender->node() != self->node()) {
        refuse("checkpoint source", "a stop", sender, "only its own process ends it");
        return;
      }
      self->state.over = true;
      quit_when_drained(self);
    },
  };
}

} // namespace

checkpoint_source_actor spawn_checkpoint_source(caf::actor_system& sys, std::string log_dir) {
  return sys.spawn<caf::detached>(checkpoint_source, std::move(log_dir));
}

} // namespace troupe
