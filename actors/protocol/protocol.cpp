#include "actors/protocol/protocol.hpp"

#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/node_id.hpp>
#include <caf/result.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

namespace {

std::string render_troupe_error(uint8_t code, caf::atom_value, const caf::message& ctx) {
  std::string out = to_string(static_cast<errc>(code));
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    out += ": " + ctx.get_as<std::string>(0);
  return out;
}

const auto end_category = caf::atom("troupe_end");

std::string render_run_end(uint8_t code, caf::atom_value, const caf::message& ctx) {
  std::string out = name_of(run_end_of(code));
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    out += ": " + ctx.get_as<std::string>(0);
  return out;
}

} // namespace

void register_protocol(caf::actor_system_config& cfg) {
#define TROUPE_REGISTER_TYPE(type) cfg.add_message_type<type>("troupe::" #type);
  TROUPE_MESSAGE_TYPES(TROUPE_REGISTER_TYPE)
#undef TROUPE_REGISTER_TYPE
  cfg.add_error_category(caf::atom("troupe"), render_troupe_error);
  cfg.add_error_category(end_category, render_run_end);
}

caf::error end_error(run_end end, const std::string& why) {
  if (end == run_end::done)
    return caf::exit_reason::normal;
  return caf::error{static_cast<uint8_t>(end), end_category, caf::make_message(why)};
}

run_end end_of(const caf::error& reason) {
  if (!reason || reason == caf::exit_reason::normal)
    return run_end::done;
  if (reason.category() == end_category)
    return run_end_of(reason.code());
  return run_end::failed;
}

caf::error make_error(const failure& f) {
  return caf::make_error(f.code, f.message);
}

maybe_failure refusal_of(const caf::error& err) {
  if (err.category() != caf::atom("troupe"))
    return std::nullopt;
  return failure{static_cast<errc>(err.code()), describe(err)};
}

std::string describe(const caf::error& err) {
  if (err.category() == caf::atom("troupe"))
    return render_troupe_error(err.code(), err.category(), err.context());
  if (err.category() == end_category)
    return render_run_end(err.code(), err.category(), err.context());
  return caf::to_string(err);
}

std::string describe_sender(const caf::strong_actor_ptr& sender) {
  if (!sender)
    return "an anonymous sender";
  return "actor " + std::to_string(sender->id()) + " on node " + caf::to_string(sender->node());
}

caf::error refuse(const std::string& who, const std::string& what,
                  const caf::strong_actor_ptr& sender, const std::string& why) {
  auto line = who + ": refused " + what + " from " + describe_sender(sender);
  auto* sys = sender ? sender->home_system : nullptr;
  if (!sys || sender->node() == sys->node() || !sys->has_middleman()) {
    spdlog::warn("{}: {}", line, why);
  } else {
    // CAF knows a remote node only by id; its middleman knows the address
    // of the connection the message came through. Ask it off this handler.
    auto middleman = sys->middleman().actor_handle();
    auto node = sender->node();
    sys->spawn([=](caf::event_based_actor* self) {
      self->request(middleman, std::chrono::seconds(5), caf::get_atom::value, node)
        .then(
          [=](const caf::node_id&, const std::string& host, uint16_t port) {
            if (host.empty())
              spdlog::warn("{}: {}", line, why);
            else
              spdlog::warn("{} at {}:{}: {}", line, host, port, why);
          },
          [=](caf::error&) { spdlog::warn("{}: {}", line, why); });
    });
  }
  return make_error({errc::unauthorized, who + " refused " + what + ": " + why});
}

caf::result<uint32_t> answer_hello(uint32_t peer_version, const std::string& peer_job,
                                   int32_t peer_task, const std::string& self_name) {
  if (peer_version != protocol_version)
    return make_error({errc::protocol_mismatch, self_name + " speaks Troupe protocol "
                                                  + std::to_string(protocol_version) + " but "
                                                  + peer_job + ":" + std::to_string(peer_task)
                                                  + " speaks " + std::to_string(peer_version)
                                                  + "; run the same Troupe release on every node"});
  return protocol_version;
}

} // namespace troupe
