#include "actors/protocol/protocol.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>
#include <caf/result.hpp>

#include "tensor/core/error.hpp"

namespace troupe {

namespace {

std::string render_troupe_error(uint8_t code, caf::atom_value, const caf::message& ctx) {
  std::string out = to_string(static_cast<errc>(code));
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    out += ": " + ctx.get_as<std::string>(0);
  return out;
}

} // namespace

void register_protocol(caf::actor_system_config& cfg) {
  cfg.add_message_type<tensor>("troupe::tensor");
  cfg.add_message_type<std::vector<tensor>>("std::vector<troupe::tensor>");
  cfg.add_message_type<pull_reply>("troupe::pull_reply");
  cfg.add_message_type<training_plan>("troupe::training_plan");
  cfg.add_message_type<step_report>("troupe::step_report");
  cfg.add_message_type<step_grant>("troupe::step_grant");
  cfg.add_message_type<step_summary>("troupe::step_summary");
  cfg.add_message_type<shard_traffic>("troupe::shard_traffic");
  cfg.add_message_type<shard_options>("troupe::shard_options");
  cfg.add_message_type<step_coordinator_actor>("troupe::step_coordinator_actor");
  cfg.add_message_type<token_queue_actor>("troupe::token_queue_actor");
  cfg.add_message_type<ps_shard_actor>("troupe::ps_shard_actor");
  cfg.add_message_type<chief_actor>("troupe::chief_actor");
  cfg.add_message_type<worker_actor>("troupe::worker_actor");
  cfg.add_error_category(caf::atom("troupe"), render_troupe_error);
}

variable_slice plan_slice(const training_plan& plan, size_t i,
                          const std::vector<variable_spec>& variables) {
  auto n = plan.variables.size();
  if (plan.shard_of.size() != n || plan.variable_of.size() != n || plan.axis_of.size() != n
      || plan.offset_of.size() != n || plan.rows_of.size() != n || i >= n)
    throw troupe_error("the training plan's lists differ in length");
  auto var = plan.variable_of[i];
  if (var < 0 || static_cast<size_t>(var) >= variables.size())
    throw troupe_error("plan slice " + plan.variables[i] + " names variable "
                       + std::to_string(var) + " of a model with "
                       + std::to_string(variables.size()));
  auto& spec = variables[static_cast<size_t>(var)];
  variable_slice s;
  s.name = plan.variables[i];
  s.variable = spec.name;
  s.axis = plan.axis_of[i];
  s.offset = plan.offset_of[i];
  s.full_shape = spec.shape;
  s.shape = spec.shape;
  if (s.axis < 0 || (s.axis > 0 && static_cast<size_t>(s.axis) >= spec.shape.size()))
    throw troupe_error("plan slice " + s.name + " is split along axis " + std::to_string(s.axis)
                       + ", beyond the rank of " + spec.name + " " + to_string(spec.shape));
  if (!s.shape.empty())
    s.shape[static_cast<size_t>(s.axis)] = plan.rows_of[i];
  auto dim = spec.shape.empty() ? 1 : spec.shape[static_cast<size_t>(s.axis)];
  if (s.offset < 0 || plan.rows_of[i] < 1 || s.offset + plan.rows_of[i] > dim)
    throw troupe_error("plan slice " + s.name + " (" + std::to_string(s.offset) + " + "
                       + std::to_string(plan.rows_of[i]) + " along axis "
                       + std::to_string(s.axis) + ") does not fit " + spec.name + " "
                       + to_string(spec.shape));
  return s;
}

caf::error make_error(const failure& f) {
  return caf::make_error(f.code, f.message);
}

std::string describe(const caf::error& err) {
  if (err.category() == caf::atom("troupe"))
    return render_troupe_error(err.code(), err.category(), err.context());
  return caf::to_string(err);
}

caf::result<uint32_t> answer_hello(uint32_t peer_version, const std::string& peer_job,
                                   int32_t peer_task, const std::string& self_name) {
  if (peer_version != protocol_version)
    return make_error({errc::protocol_mismatch,
                       self_name + " speaks Troupe protocol " + std::to_string(protocol_version)
                         + " but " + peer_job + ":" + std::to_string(peer_task)
                         + " speaks " + std::to_string(peer_version)
                         + "; run the same Troupe release on every node"});
  return protocol_version;
}

} // namespace troupe
