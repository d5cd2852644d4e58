#include "tensor/data/follow_reader.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "tensor/data/catalog_steps.hpp"

namespace troupe {

namespace {

bool still_written(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size()
           && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name.empty() || name[0] == '.' || ends(".tmp") || ends(".part") || ends(".inprogress");
}

// The complete files of `dir` in share `share`, by number (a number twice:
// the first name in sorted order).
std::map<uint64_t, std::string> share_files(const std::string& dir, data_share share) {
  std::map<uint64_t, std::string> out;
  std::error_code error;
  for (auto& entry : std::filesystem::directory_iterator(dir, error)) {
    auto name = entry.path().filename().string();
    auto number = sequence_number(name);
    if (!number || share_of_file(*number, share.count) != share.rank
        || !entry.is_regular_file(error))
      continue;
    auto [at, fresh] = out.emplace(*number, entry.path().string());
    if (!fresh && entry.path().string() < at->second)
      at->second = entry.path().string();
  }
  return out;
}

} // namespace

std::optional<uint64_t> sequence_number(const std::string& name) {
  if (still_written(name))
    return std::nullopt;
  uint64_t number = 0;
  int digits = 0;
  for (char c : name)
    if (c >= '0' && c <= '9') {
      if (++digits > 18)
        return std::nullopt;
      number = number * 10 + static_cast<uint64_t>(c - '0');
    }
  if (digits == 0)
    return std::nullopt;
  return number;
}

size_t share_of_file(uint64_t number, size_t count) {
  // splitmix64's finalizer: consecutive numbers spread over the shares.
  uint64_t z = number + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return count == 0 ? 0 : static_cast<size_t>(z % count);
}

std::shared_ptr<data_split> split_of_file(const data_split& like, const std::string& path) {
  auto split = std::make_shared<data_split>(like);
  split->name = path;
  split->follow.clear();
  split->files = {{path, "", 0, 0}};
  std::vector<catalog_steps::file_scan> scans{catalog_steps::scan_file(*split, split->files[0])};
  catalog_steps::apply_classes(split, scans);
  return split;
}

std::optional<std::string> next_unread_file(const std::string& dir,
                                            const std::vector<uint64_t>& reading) {
  if (reading.empty())
    return std::nullopt;
  std::optional<std::pair<uint64_t, std::string>> newest;
  std::error_code error;
  for (auto& entry : std::filesystem::directory_iterator(dir, error)) {
    auto name = entry.path().filename().string();
    auto number = sequence_number(name);
    if (!number || !entry.is_regular_file(error)
        || *number <= reading[share_of_file(*number, reading.size())])
      continue;
    if (!newest || *number > newest->first)
      newest.emplace(*number, entry.path().string());
  }
  if (!newest)
    return std::nullopt;
  return newest->second;
}

follow_reader::follow_reader(std::shared_ptr<const data_split> split, const stream_options& options)
  : split_(std::move(split)), options_(options), features_(static_cast<size_t>(split_->features())),
    share_(options.share.count ? options.share : data_share{options.index, options.count}),
    one_file_(std::make_shared<data_split>(*split_)) {
  one_file_->follow.clear();
  if (!std::filesystem::is_directory(split_->follow))
    throw data_error("data.follow: " + split_->follow + " is not a directory");
}

void follow_reader::set_next_share(data_share share) {
  if (share.count != 0 && share != share_)
    throw data_error("data.follow: the workers' shares of a followed directory are fixed (share "
                     + std::to_string(share_.rank) + " of " + std::to_string(share_.count)
                     + " cannot become " + std::to_string(share.rank) + " of "
                     + std::to_string(share.count) + "); run with cluster.max-workers = 0");
}

void follow_reader::seek(stream_position position) {
  set_next_share(position.share);
  source_.reset();
  file_ = position.epoch;
  offset_ = position.offset;
  done_ = false;
}

bool follow_reader::open_next() {
  auto files = share_files(split_->follow, share_);
  auto next = done_ ? files.upper_bound(file_) : files.lower_bound(file_);
  if (next == files.end())
    return false;
  if (next->first != file_) {
    file_ = next->first;
    offset_ = 0;
  }
  done_ = false;
  one_file_->files = {{next->second, "", 0, 0}};
  source_.emplace(one_file_, 0);
  if (offset_ > 0)
    source_->seek(offset_);
  return true;
}

void follow_reader::next_batch(batch& out) {
  auto n = options_.batch_size;
  size_batch(out, n, *split_);
  bool regression = split_->task == objective::regression;
  float unused = 0;
  for (size_t i = 0; i < n;) {
    if (stopping_)
      throw stream_stopped();
    if (!source_ && !open_next()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    bool got = source_->next(out.images.data() + i * features_, out.labels[i],
                             regression ? out.targets[i] : unused);
    offset_ = source_->position();
    if (got) {
      ++i;
    } else {
      source_.reset();
      done_ = true;
    }
  }
}

} // namespace troupe
