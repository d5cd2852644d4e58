#include "actors/chief/checkpoint_writer.hpp"

#include <filesystem>
#include <memory>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "actors/exchange/basp_path.hpp"
#include "actors/exchange/link_opening.hpp"
#include "tensor/checkpoint/layout.hpp"

namespace troupe {

namespace {

struct writing {
  writing(caf::event_based_actor* self, checkpoint_job j, caf::actor c)
    : job(std::move(j)), chief(std::move(c)), basp(self, job.shards, job.request_timeout),
      exchange(basp, job.request_timeout) {}

  checkpoint_job job;
  caf::actor chief;
  basp_path<caf::event_based_actor> basp;
  shard_exchange exchange;
  checkpoint_dir dir{std::string()};
  std::string staging;
  size_t shard = 0;
  int32_t next = 0; // the next tensor of the current shard
  std::unique_ptr<safetensors_writer> file;
  uint64_t bytes = 0;
  std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();

  std::string file_name() const { return "ps-" + std::to_string(shard) + ".safetensors"; }
};

void report(caf::event_based_actor* self, writing& w, bool ok, const std::string& what) {
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - w.began).count();
  self->send(w.chief, saved_atom::value, w.job.manifest.step, ok, what, w.bytes, seconds);
  self->quit();
}

void step(caf::event_based_actor* self, std::shared_ptr<writing> w);

// Tensor i's element type in the file: F32, or the I64/U32 of an embedding
// table's keys and counters (travelling as floats that hold their bytes).
element_type type_of(const snapshot_index& copy, size_t i) {
  if (i >= copy.types.size())
    return element_type::f32;
  auto type = static_cast<element_type>(copy.types[i]);
  if (std::string(name_of(type)) == "?")
    throw checkpoint_error("a shard's copy names an unknown element type for " + copy.names[i]);
  return type;
}

// Ends the current shard's file, or moves on to the next shard, or commits.
void advance(caf::event_based_actor* self, std::shared_ptr<writing> w) {
  auto& job = w->job;
  while (w->shard < job.copies.size() && job.copies[w->shard].names.empty())
    ++w->shard;
  if (w->shard == job.copies.size()) {
    auto path = w->dir.commit(w->staging, job.manifest, job.keep);
    report(self, *w, true, path);
    return;
  }
  auto& copy = job.copies[w->shard];
  if (!w->file) {
    // Consecutive pieces of one name are one tensor of the file (an
    // embedding table's field, fetched in pieces): their rows add up.
    std::vector<safetensors_writer::entry> entries;
    for (size_t i = 0; i < copy.names.size(); ++i) {
      if (i > 0 && copy.names[i] == copy.names[i - 1] && !copy.shapes[i].empty()
          && !entries.back().shape.empty()) {
        entries.back().shape[0] += copy.shapes[i][0];
        continue;
      }
      entries.push_back({copy.names[i], copy.shapes[i], type_of(copy, i)});
    }
    std::map<std::string, std::string> metadata{{"step", std::to_string(job.manifest.step)}};
    for (size_t i = 0; i + 1 < copy.metadata.size(); i += 2)
      metadata.emplace(copy.metadata[i], copy.metadata[i + 1]);
    w->file = std::make_unique<safetensors_writer>(
      (std::filesystem::path(w->staging) / w->file_name()).string(), std::move(entries),
      std::move(metadata));
  }
  if (static_cast<size_t>(w->next) < copy.names.size()) {
    step(self, w);
    return;
  }
  auto [crc, bytes] = w->file->finish();
  w->file.reset();
  w->bytes += bytes;
  job.manifest.files.push_back({w->file_name(), crc, bytes});
  for (auto& t : describe_saved_tensors(job.plan, job.variables, copy.names, w->file_name()))
    job.manifest.tensors.push_back(std::move(t));
  ++w->shard;
  w->next = 0;
  advance(self, w);
}

// The next tensor of the current shard's copy, appended to its file.
void step(caf::event_based_actor* self, std::shared_ptr<writing> w) {
  auto& job = w->job;
  exchange_part part;
  part.shard = static_cast<int32_t>(w->shard);
  part.copy = {job.copies[w->shard].ticket, w->next};
  w->exchange.start(exchange_kind::fetch, push_header{job.run, -1, 0, 0}, {std::move(part)}, false);
  w->exchange.finish([self, w](std::vector<part_outcome>& outcomes) {
    auto& out = outcomes.at(0);
    if (out.lost || out.values.size() != 1) {
      report(self, *w, false,
             "fetching from ps:" + std::to_string(w->shard)
               + " failed: " + (out.lost ? *out.lost : std::string("not one tensor")));
      return;
    }
    try {
      auto& copy = w->job.copies[w->shard];
      auto index = static_cast<size_t>(w->next);
      auto type = type_of(copy, index);
      auto& value = out.values[0];
      auto bytes = static_cast<size_t>(num_elements(copy.shapes[index])) * element_bytes(type);
      if (type == element_type::f32 ? value.shape() != copy.shapes[index]
                                    : value.size() * sizeof(float) < bytes)
        throw checkpoint_error("ps:" + std::to_string(w->shard) + " sent " + copy.names[index]
                               + " in another shape than its copy announced");
      w->file->append_part(value.data(), bytes);
      // Free the piece now: advance fetches the next one before this
      // returns (a fetch completes within start), so each piece kept here
      // would live until the whole save is written.
      outcomes.clear();
      ++w->next;
      advance(self, w);
    } catch (const std::exception& e) {
      report(self, *w, false, e.what());
    }
  });
}

} // namespace

void checkpoint_writer(caf::event_based_actor* self, checkpoint_job job, caf::actor chief) {
  auto w = std::make_shared<writing>(self, std::move(job), std::move(chief));
  try {
    w->dir = checkpoint_dir(w->job.log_dir);
    w->staging = w->dir.begin(w->job.manifest.step);
  } catch (const std::exception& e) {
    report(self, *w, false, e.what());
    return;
  }
  auto& to_write = w->job;
  open_bulk_links(
    self, w->exchange, to_write.shards, to_write.bulk,
    {to_write.run, -1, "chief", to_write.request_timeout}, [] { return true; },
    [self, w] {
      try {
        advance(self, w);
      } catch (const std::exception& e) {
        report(self, *w, false, e.what());
      }
    },
    [self, w](size_t s, const caf::error& err) {
      report(self, *w, false,
             "asking ps:" + std::to_string(s) + " for its bulk path failed: " + describe(err));
    });
}

} // namespace troupe
