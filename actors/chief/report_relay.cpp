// The chief's side of the report channel (actors/net/report_channel.hpp):
// workers in other processes send their reports on connections of their
// own instead of over BASP. Each batch reaches the chief as a `relayed`
// message from its own process and is settled by the mode's
// step_coordination as the same batch over BASP; the grants go back on the
// batch's connection, at once or from the grant desk once a parked worker
// gets a step. Who sent a batch is its connection's ticket: issued in the
// plan of one admission of the worker index, checked against the index's
// current admission when the batch is settled.
#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include <type_traits>

#include "actors/chief/chief_run.hpp"
#include "actors/protocol/report_frames.hpp"

namespace troupe::chief_run {

namespace {

void answer_grants(report_server& desk, uint64_t key, uint64_t request,
                   const std::vector<step_grant>& grants) {
  bulk::meta_writer fields;
  write_grants(fields, grants);
  desk.answer(key, request, fields);
}

// What step_coordination answered: grants now, a refusal (the connection
// closes; the worker waits for the run to recover, as with a refused
// request over BASP), or nothing yet (parked: relayed_reply answers).
template <class T>
void answer_result(self_ptr self, uint64_t key, uint64_t request, caf::result<T>& res) {
  auto& desk = *self->state.report_desk;
  if (res.flag == caf::rt_error) {
    desk.refuse(key, request, {errc::invalid_request, describe(res.err)});
    return;
  }
  if (res.flag != caf::rt_value || res.value.empty())
    return;
  if constexpr (std::is_same_v<T, step_grant>)
    answer_grants(desk, key, request, {res.value.template get_as<step_grant>(0)});
  else
    answer_grants(desk, key, request, res.value.template get_as<std::vector<step_grant>>(0));
}

} // namespace

void open_report_desk(self_ptr self) {
  auto& st = self->state;
  if (st.config.train.mode == update_mode::sync || st.links.bulk.chief_host.empty())
    return;
  report_server_options options;
  options.host = st.links.bulk.chief_host;
  options.tls = st.links.bulk.tls;
  auto lease = static_cast<size_t>(st.steps->lease());
  auto chief = caf::actor_cast<caf::actor_addr>(self); // weak: the desk must not keep it alive
  auto relay = [chief, lease](uint64_t key, uint64_t request, int32_t,
                              bulk::meta_reader& fields) -> maybe_failure {
    std::vector<step_report> reports;
    if (!read_reports(fields, lease, reports))
      return failure{errc::invalid_request, "report channel: a malformed batch (1.."
                                              + std::to_string(lease)
                                              + " reports of this run's layout)"};
    auto to = caf::actor_cast<caf::actor>(chief);
    if (!to)
      return failure{errc::training_stopped, "report channel: the chief has stopped"};
    caf::anon_send(to, relayed_atom::value, key, request, std::move(reports));
    return std::nullopt;
  };
  maybe_failure error;
  st.report_desk = std::make_unique<report_server>(relay, options, error);
  if (error) {
    spdlog::warn("chief: no report channel ({}); workers report over the control connection",
                 error->message);
    st.report_desk.reset();
    return;
  }
  spdlog::info("chief: report channel on {}:{}{}", options.host, st.report_desk->port(),
               options.tls ? " (mutual TLS)" : "");
}

void on_relayed(self_ptr self, uint64_t key, uint64_t request, std::vector<step_report>& reports) {
  auto& st = self->state;
  if (!st.report_desk) {
    refuse("chief", "a relayed batch of reports", self->current_sender(),
           "this chief has no report channel");
    return;
  }
  // Only this process's connection threads know a connection's key.
  auto who = st.report_desk->worker_of(key);
  auto admission = who ? st.admission_of.find(who->worker) : st.admission_of.end();
  if (!who || admission == st.admission_of.end() || admission->second != who->owner
      || reports.empty() || reports.front().worker != who->worker) {
    auto err = refuse("chief", "a batch of reports on the report channel", self->current_sender(),
                      "its connection was not opened by the worker admitted under that index");
    if (who)
      st.report_desk->refuse(key, request, {errc::unauthorized, describe(err)});
    return;
  }
  st.relaying = chief_state::relay_target{key, request, who->worker};
  if (st.config.train.report_every == 1 && reports.size() == 1) {
    auto res = st.steps->on_report(self, reports.front());
    answer_result(self, key, request, res);
  } else {
    auto res = st.steps->on_reports(self, reports);
    answer_result(self, key, request, res);
  }
  st.relaying.reset();
}

std::function<void(const std::vector<step_grant>&)> relayed_reply(self_ptr self) {
  auto& st = self->state;
  if (!st.relaying || !st.report_desk)
    return {};
  return [desk = st.report_desk.get(), key = st.relaying->key, request = st.relaying->request](
           const std::vector<step_grant>& grants) { answer_grants(*desk, key, request, grants); };
}

} // namespace troupe::chief_run
