// Fuzz target: the checkpoint reader (tensor/checkpoint). The first byte
// picks what the rest is: even, a safetensors file (opened, every tensor
// read; where it holds an embedding table's rows, restored onto two shards'
// tables and streamed into an export as tensor/export/table_export does);
// odd, a manifest (parsed as JSON, then checked field by field).
// Whatever the bytes claim, the outcome is a value or a checkpoint_error /
// parse_error naming the problem, and memory follows the bytes present.

#include <fstream>
#include <string>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/table_file.hpp"
#include "tensor/export/model_export.hpp"
#include "tensor/export/table_export.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

// The rows of table "embedding" (dim 3, 4 buckets, Adagrad: the seed's
// layout), restored and exported.
void use_table_rows(const troupe::safetensors_file& file, const std::string& out) {
  using namespace troupe;
  if (file.entries().count("emb/embedding/keys") == 0)
    return;
  embedding_table_config config;
  config.name = "embedding";
  config.dim = 3;
  config.buckets.count = 4;
  config.optimizer.kind = sparse_optimizer_kind::adagrad;
  embedding_table first(config), second(config);
  try {
    restore_table_rows(file, {&first, &second});
  } catch (const troupe_error&) {
  }
  model_card card;
  card.embedding_dim = 2; // rows of [w | 2 factors]
  auto rows = rows_of_saved_table({{"fuzz input", &file}}, card);
  auto n = static_cast<int64_t>(rows->rows());
  safetensors_writer writer(
    out, {{table_keys_name, {n}, element_type::i64}, {table_values_name, {n, 3}}});
  rows->append_to(writer);
  writer.finish();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 2 == 0) {
      static const troupe::fuzz::scratch_dir scratch("checkpoint");
      static const std::string path = scratch.file("input.safetensors");
      std::ofstream(path, std::ios::binary | std::ios::trunc) << rest;
      troupe::safetensors_file file(path);
      for (auto& [name, entry] : file.entries()) {
        if (entry.type == troupe::element_type::i64)
          file.read_i64(name);
        else if (entry.type == troupe::element_type::u32)
          file.read_u32(name);
        else
          file.read(name);
      }
      static const std::string exported = scratch.file("export.safetensors");
      use_table_rows(file, exported);
    } else {
      troupe::checkpoint_manifest::from_json(troupe::json::parse(rest), "fuzz input");
    }
  } catch (const troupe::troupe_error&) {
    // refused, with a message: the expected outcome for most inputs
  }
  return 0;
}
