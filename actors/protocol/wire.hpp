#pragma once
// How the messages of messages.hpp cross the wire. A troupe::tensor is its
// shape, then the floats as one raw block: CAF 0.17's default float
// serialisation corrupts NaN, infinities and denormals and runs at ~0.1
// GB/s; apply_raw is bit-exact and a memcpy. Keys and counts are raw blocks
// too. The raw blocks are host-endian: every node of a cluster must share
// it (x86-64). The other messages are their fields in order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

#include "actors/net/wire_limits.hpp"
#include "actors/protocol/messages.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/nn/declared_model.hpp"
#include "tensor/plan/training_plan.hpp"
#include "tensor/sparse/table_setup.hpp"

namespace troupe {

inline caf::error inspect(caf::serializer& f, tensor& x) {
  shape_t shape = x.shape();
  size_t n = x.size();
  if (auto err = f(shape))
    return err;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), x.data()))
      return err;
  return f.end_sequence();
}

inline caf::error inspect(caf::deserializer& f, tensor& x) {
  shape_t shape;
  size_t n = 0;
  if (auto err = f(shape))
    return err;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > max_wire_elements())
    return caf::make_error(caf::sec::invalid_argument, "tensor of " + std::to_string(n)
                                                         + " elements exceeds the limit of "
                                                         + std::to_string(max_wire_elements())
                                                         + " (the model's largest variable)");
  // A binary message's bytes are all in memory: a count the rest of the
  // message cannot hold is refused before it becomes an allocation.
  if (auto* bytes = dynamic_cast<caf::binary_deserializer*>(&f))
    if (bytes->remaining() / sizeof(float) < n)
      return caf::make_error(caf::sec::invalid_argument,
                             "tensor claims " + std::to_string(n) + " floats but its message holds "
                               + std::to_string(bytes->remaining()) + " more bytes");
  if (shape.size() > 8)
    return caf::make_error(caf::sec::invalid_argument, "tensor of rank above 8");
  // The product of the non-zero dimensions, bounded like the count so that
  // no later arithmetic on the shape can overflow.
  bool empty = false;
  uint64_t product = 1;
  for (auto d : shape) {
    if (d < 0)
      return caf::make_error(caf::sec::invalid_argument, "tensor shape has a negative dimension");
    if (d == 0) {
      empty = true;
      continue;
    }
    if (product > max_wire_elements() / static_cast<uint64_t>(d))
      return caf::make_error(caf::sec::invalid_argument, "tensor shape exceeds the limit of "
                                                           + std::to_string(max_wire_elements())
                                                           + " elements");
    product *= static_cast<uint64_t>(d);
  }
  if ((empty ? 0 : product) != n)
    return caf::make_error(caf::sec::invalid_argument,
                           "tensor shape does not match its element count");
  std::vector<float> values(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), values.data()))
      return err;
  if (auto err = f.end_sequence())
    return err;
  x.assign(std::move(shape), std::move(values));
  return caf::none;
}

// Keys and counts of embedding rows travel as raw blocks like a tensor's,
// so that 10^6 keys cost a memcpy, each count checked against
// max_wire_keys and against the bytes the message holds before anything is
// allocated (a claim of 10^9 keys is refused, not allocated).

/// The most keys one row_keys may carry (the shards' own limit,
/// embedding.max-keys-per-request, is lower and named in their refusal).
constexpr size_t max_wire_keys = size_t{1} << 24;

namespace wire_detail {

template <class T>
caf::error save_block(caf::serializer& f, std::vector<T>& v) {
  size_t n = v.size();
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), v.data()))
      return err;
  return f.end_sequence();
}

template <class T>
caf::error load_block(caf::deserializer& f, std::vector<T>& v) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > max_wire_keys)
    return caf::make_error(caf::sec::invalid_argument, "a request of " + std::to_string(n)
                                                         + " keys exceeds the limit of "
                                                         + std::to_string(max_wire_keys));
  if (auto* bytes = dynamic_cast<caf::binary_deserializer*>(&f))
    if (bytes->remaining() / sizeof(T) < n)
      return caf::make_error(caf::sec::invalid_argument, "a key block claims " + std::to_string(n)
                                                           + " entries but its message holds "
                                                           + std::to_string(bytes->remaining())
                                                           + " more bytes");
  v.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), v.data()))
      return err;
  return f.end_sequence();
}

} // namespace wire_detail

/// Every other inspector (to_string, deep_to_string) prints the shape only.
template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, tensor& x) {
  auto shape = to_string(x.shape());
  return f(caf::meta::type_name("tensor"), shape);
}

inline caf::error inspect(caf::serializer& f, restored_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::save_block(f, x.keys))
    return err;
  if (auto err = wire_detail::save_block(f, x.frequencies))
    return err;
  if (auto err = wire_detail::save_block(f, x.last_updates))
    return err;
  return inspect(f, x.payloads);
}

inline caf::error inspect(caf::deserializer& f, restored_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::load_block(f, x.keys))
    return err;
  if (auto err = wire_detail::load_block(f, x.frequencies))
    return err;
  if (auto err = wire_detail::load_block(f, x.last_updates))
    return err;
  return inspect(f, x.payloads);
}

template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, restored_rows& x) {
  auto n = x.keys.size();
  return f(caf::meta::type_name("restored_rows"), x.table, n);
}

// -- a step's requests: keys and rows as blocks ----------------------------------

/// The most tables one pull or push may name.
constexpr size_t max_wire_tables = 1024;

namespace wire_detail {

// A vector of table_keys or step_rows, its count bounded before anything
// is allocated.
template <class T>
caf::error save_tables(caf::serializer& f, std::vector<T>& v) {
  size_t n = v.size();
  if (auto err = f.begin_sequence(n))
    return err;
  for (auto& x : v)
    if (auto err = inspect(f, x))
      return err;
  return f.end_sequence();
}

template <class T>
caf::error load_tables(caf::deserializer& f, std::vector<T>& v) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > max_wire_tables)
    return caf::make_error(caf::sec::invalid_argument, "a request naming " + std::to_string(n)
                                                         + " tables exceeds the limit of "
                                                         + std::to_string(max_wire_tables));
  v.resize(n);
  for (auto& x : v)
    if (auto err = inspect(f, x))
      return err;
  return f.end_sequence();
}

} // namespace wire_detail

inline caf::error inspect(caf::serializer& f, table_keys& x) {
  if (auto err = f(x.table))
    return err;
  return wire_detail::save_block(f, x.keys);
}

inline caf::error inspect(caf::deserializer& f, table_keys& x) {
  if (auto err = f(x.table))
    return err;
  return wire_detail::load_block(f, x.keys);
}

inline caf::error inspect(caf::serializer& f, step_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::save_block(f, x.keys))
    return err;
  if (auto err = wire_detail::save_block(f, x.counts))
    return err;
  return inspect(f, x.grads);
}

inline caf::error inspect(caf::deserializer& f, step_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::load_block(f, x.keys))
    return err;
  if (auto err = wire_detail::load_block(f, x.counts))
    return err;
  return inspect(f, x.grads);
}

inline caf::error inspect(caf::serializer& f, pull_request& x) {
  if (auto err = f(x.run, x.names, x.precision))
    return err;
  return wire_detail::save_tables(f, x.tables);
}

inline caf::error inspect(caf::deserializer& f, pull_request& x) {
  if (auto err = f(x.run, x.names, x.precision))
    return err;
  return wire_detail::load_tables(f, x.tables);
}

inline caf::error inspect(caf::serializer& f, step_push& x) {
  if (auto err = f(x.run, x.worker, x.step, x.proof, x.precision, x.names, x.gradients))
    return err;
  return wire_detail::save_tables(f, x.tables);
}

inline caf::error inspect(caf::deserializer& f, step_push& x) {
  if (auto err = f(x.run, x.worker, x.step, x.proof, x.precision, x.names, x.gradients))
    return err;
  return wire_detail::load_tables(f, x.tables);
}

/// Every other inspector (to_string) prints what a request names, not its data.
template <class Inspector, class T>
using printing_only = std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                                         && !std::is_base_of<caf::deserializer, Inspector>::value,
                                       T>;

template <class Inspector>
printing_only<Inspector, typename Inspector::result_type> inspect(Inspector& f, table_keys& x) {
  auto n = x.keys.size();
  return f(caf::meta::type_name("table_keys"), x.table, n);
}

template <class Inspector>
printing_only<Inspector, typename Inspector::result_type> inspect(Inspector& f, step_rows& x) {
  auto n = x.keys.size();
  return f(caf::meta::type_name("step_rows"), x.table, n);
}

template <class Inspector>
printing_only<Inspector, typename Inspector::result_type> inspect(Inspector& f, pull_request& x) {
  return f(caf::meta::type_name("pull_request"), x.run, x.names, x.precision, x.tables);
}

template <class Inspector>
printing_only<Inspector, typename Inspector::result_type> inspect(Inspector& f, step_push& x) {
  return f(caf::meta::type_name("step_push"), x.run, x.worker, x.step, x.names, x.tables);
}

// -- the other messages: their fields in order ----------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pull_reply& x) {
  return f(caf::meta::type_name("pull_reply"), x.version, x.values, x.rows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, push_receipt& x) {
  return f(caf::meta::type_name("push_receipt"), x.version, x.receipt);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.run, x.worker, x.step, x.applied, x.loss,
           x.correct, x.examples, x.data_epoch, x.data_offset, x.share_rank, x.share_count,
           x.receipt);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_grant& x) {
  return f(caf::meta::type_name("step_grant"), x.step, x.stop, x.proof);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reported_metrics& x) {
  return f(caf::meta::type_name("reported_metrics"), x.run, x.worker, x.names, x.values);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_summary& x) {
  return f(caf::meta::type_name("step_summary"), x.step, x.loss, x.correct, x.examples,
           x.straggler_ms, x.dropped, x.tokens, x.position_workers, x.position_epochs,
           x.position_offsets, x.position_share_ranks, x.position_share_counts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, variable_traffic& x) {
  return f(caf::meta::type_name("variable_traffic"), x.name, x.bytes_in, x.bytes_out);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_report& x) {
  return f(caf::meta::type_name("table_report"), x.name, x.rows, x.bytes, x.admitted, x.evicted,
           x.not_admitted, x.hottest_keys, x.hottest_counts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_traffic& x) {
  return f(caf::meta::type_name("shard_traffic"), x.shard, x.bytes_held, x.bytes_in, x.bytes_out,
           x.pulls, x.pushes, x.updates, x.variables, x.unauthorized_pushes, x.row_pulls,
           x.row_pushes, x.keys_pulled, x.keys_pushed, x.tables, x.repeated_pushes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_index& x) {
  return f(caf::meta::type_name("snapshot_index"), x.version, x.ticket, x.names, x.shapes, x.types,
           x.metadata);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_listing& x) {
  return f(caf::meta::type_name("checkpoint_listing"), x.step, x.final, x.files, x.sizes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_chunk& x) {
  return f(caf::meta::type_name("checkpoint_chunk"), x.bytes, x.token);
}

/// planned_slice (tensor/plan/training_plan.hpp) on the wire.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, planned_slice& x) {
  return f(caf::meta::type_name("planned_slice"), x.name, x.shard, x.variable, x.axis, x.offset,
           x.extent);
}

/// An embedding table's rules on the wire (tensor/sparse/table_setup.hpp);
/// a shard checks them (table_setup::check) before it holds anything.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_setup& x) {
  auto& t = x.table;
  auto& o = t.optimizer;
  return f(caf::meta::type_name("table_setup"), t.name, t.dim, t.init.kind, t.init.scale,
           t.init.seed, o.kind, o.learning_rate, o.initial_accumulator, o.l1, o.l2, o.lr_power,
           o.beta1, o.beta2, o.epsilon, t.buckets.count, t.buckets.seed, x.admission.after_count,
           x.admission.probability, x.eviction.after_steps, x.eviction.l2_below,
           x.eviction.max_bytes, x.evict_interval, x.reduction, x.max_keys, t.kind, t.rows,
           t.partition);
}

/// A worker program's declared model (tensor/nn/declared_model.hpp): each
/// variable's name and shape, its first value, and each table's name and
/// dim. The chief checks it (declaration_problems) before it places anything.
inline caf::error inspect(caf::serializer& f, model_declaration& x) {
  std::vector<std::string> names, tables;
  std::vector<shape_t> shapes;
  std::vector<uint32_t> dims;
  for (auto& v : x.variables) {
    names.push_back(v.name);
    shapes.push_back(v.shape);
  }
  for (auto& t : x.tables) {
    tables.push_back(t.name);
    dims.push_back(t.dim);
  }
  return f(names, shapes, x.initial, tables, dims);
}

inline caf::error inspect(caf::deserializer& f, model_declaration& x) {
  std::vector<std::string> names, tables;
  std::vector<shape_t> shapes;
  std::vector<uint32_t> dims;
  if (auto err = f(names, shapes, x.initial, tables, dims))
    return err;
  if (names.size() != shapes.size() || tables.size() != dims.size())
    return caf::make_error(caf::sec::invalid_argument,
                           "a model declaration whose names and shapes differ in number");
  x.variables.clear();
  for (size_t i = 0; i < names.size(); ++i)
    x.variables.push_back({names[i], shapes[i], {}});
  x.tables.clear();
  for (size_t i = 0; i < tables.size(); ++i)
    x.tables.push_back({tables[i], dims[i]});
  return caf::none;
}

template <class Inspector>
printing_only<Inspector, typename Inspector::result_type> inspect(Inspector& f,
                                                                  model_declaration& x) {
  auto variables = x.variables.size();
  auto tables = x.tables.size();
  return f(caf::meta::type_name("model_declaration"), variables, tables);
}

} // namespace troupe
