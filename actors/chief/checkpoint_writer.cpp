#include "actors/chief/checkpoint_writer.hpp"

#include <filesystem>
#include <memory>

#include <caf/event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "tensor/checkpoint/layout.hpp"

namespace troupe {

namespace {

struct writing {
  checkpoint_job job;
  caf::actor chief;
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
    std::vector<safetensors_writer::entry> entries;
    for (size_t i = 0; i < copy.names.size(); ++i)
      entries.push_back({copy.names[i], copy.shapes[i]});
    w->file = std::make_unique<safetensors_writer>(
      (std::filesystem::path(w->staging) / w->file_name()).string(), std::move(entries),
      std::map<std::string, std::string>{{"step", std::to_string(job.manifest.step)}});
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

void step(caf::event_based_actor* self, std::shared_ptr<writing> w) {
  auto& job = w->job;
  self
    ->request(job.shards[w->shard], job.request_timeout, fetch_atom::value, job.run,
              job.copies[w->shard].ticket, w->next)
    .then(
      [self, w](tensor& value) {
        try {
          w->file->append(value);
          ++w->next;
          advance(self, w);
        } catch (const std::exception& e) {
          report(self, *w, false, e.what());
        }
      },
      [self, w](caf::error& err) {
        report(self, *w, false,
               "fetching from ps:" + std::to_string(w->shard) + " failed: " + describe(err));
      });
}

} // namespace

void checkpoint_writer(caf::event_based_actor* self, checkpoint_job job, caf::actor chief) {
  auto w = std::make_shared<writing>();
  w->job = std::move(job);
  w->chief = std::move(chief);
  try {
    w->dir = checkpoint_dir(w->job.log_dir);
    w->staging = w->dir.begin(w->job.manifest.step);
    advance(self, w);
  } catch (const std::exception& e) {
    report(self, *w, false, e.what());
  }
}

} // namespace troupe
