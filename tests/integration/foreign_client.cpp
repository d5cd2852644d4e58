// A program that is not in the cluster file but speaks Troupe's protocol:
// it connects to a running cluster's chief and ps shard and tries every
// message a stranger could use to stop, steer, corrupt or read the run.
//   troupe-foreign-client CHIEF_HOST:PORT PS_HOST:PORT
// Prints one line per attempt. Exit 0 when every request was refused (the
// one-way messages are judged by the nodes' logs), 1 when any was accepted,
// 3 when it cannot connect at all (what a TLS cluster does to it).
//   troupe-foreign-client --hold N SECONDS HOST:PORT
// opens N TCP connections that never send a byte, holds them for SECONDS and
// prints how many the node closed (and when the last one went).
//   troupe-foreign-client --sweep ps|chief HOST:PORT [CERT KEY CAFILE]
// sends messages naming each of CAF's built-in types with hostile bytes
// (foreign_frames.hpp), over mutual TLS with a certificate when given; exit
// 0 when the node answered a hello after every one.
//   troupe-foreign-client --huge N SECONDS HOST:PORT
// sends N BASP headers announcing 4 GiB each, on N connections.
//   troupe-foreign-client --forge RUN PS_HOST:PORT
// knows the run id (as if read off the wire) and pushes worker 0's steps,
// later ones and the current one, with gradients 1000x, over a bulk
// connection it asked a ticket for and over BASP; then tries a spent ticket
// again. Exit 0 when every push and the spent ticket were refused.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <caf/openssl/all.hpp>

#include "actors/net/bulk_client.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/wire.hpp"
#include "tests/integration/foreign_frames.hpp"

using namespace troupe;

namespace {

struct client_config : caf::actor_system_config {
  client_config() {
    load<caf::io::middleman>();
    register_protocol(*this);
    set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  }
};

// A stranger that names CAF's own types; an insider's certificate when given.
struct impostor_config : client_config {
  impostor_config(int argc, char** argv) {
    foreign::register_impostors(*this);
    if (argc == 7) {
      load<caf::openssl::manager>();
      openssl_certificate = argv[4];
      openssl_key = argv[5];
      openssl_cafile = argv[6];
    }
  }
};

bool split(const std::string& address, std::string& host, uint16_t& port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return false;
  host = address.substr(0, colon);
  port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
  return true;
}

int accepted = 0;

// A request a stranger must not get an answer to.
template <class Reply, class Handle, class... Ts>
void must_refuse(caf::scoped_actor& self, const Handle& to, const char* what, Ts&&... xs) {
  self->request(to, std::chrono::seconds(10), std::forward<Ts>(xs)...)
    .receive(
      [&](Reply&) {
        std::printf("ACCEPTED: %s\n", what);
        ++accepted;
      },
      [&](caf::error& err) { std::printf("refused: %s: %s\n", what, describe(err).c_str()); });
}

// A port scanner or a careless tool: connections that never speak.
int hold_silent_connections(int count, int seconds, const foreign::target& node) {
  auto held = foreign::hold_connections(node, count, seconds, [](int) { return std::string(); });
  if (!held)
    return 2;
  std::printf("held %zu connection(s) (%d refused at connect): closed by the node %zu, "
              "last after %.1f s\n",
              held->open, held->failed, held->closed, held->last_closed_s);
  return 0;
}

// A forger who knows the run: every push it makes must be refused.
int forge_pushes(run_id run, const std::string& host, uint16_t port) {
  client_config cfg;
  caf::actor_system sys{cfg};
  auto shard = sys.middleman().remote_actor<ps_shard_actor>(host, port);
  if (!shard) {
    std::printf("cannot connect: %s\n", sys.render(shard.error()).c_str());
    return 3;
  }
  caf::scoped_actor self{sys};
  uint16_t bulk_port = 0;
  uint64_t ticket = 0;
  self->request(*shard, std::chrono::seconds(10), bulk_atom::value, run, int32_t{0})
    .receive([&](uint16_t p, uint64_t t) { bulk_port = p, ticket = t; },
             [&](caf::error& err) { std::printf("no ticket: %s\n", describe(err).c_str()); });
  std::vector<std::string> names{"softmax/weights", "softmax/biases"};
  std::vector<tensor> grads{tensor({784, 10}, 1000.0f), tensor({10}, 1000.0f)};
  auto until = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  int pushes = 0;
  if (bulk_port != 0) {
    maybe_failure error;
    auto link = bulk_link::open(host, bulk_port, run, ticket, "forger", until(), error);
    if (!link) {
      std::printf("no bulk connection: %s\n", error ? error->message.c_str() : "");
      return 3;
    }
    for (int64_t step : {0, 1, 5, 1000000}) {
      link->start_push(run, 0, step, 0x5eed + static_cast<uint64_t>(step), names, grads, {});
      complete_all({link.get()}, until());
      ++pushes;
      if (!link->error()) {
        std::printf("ACCEPTED: bulk push of step %lld as worker:0\n", static_cast<long long>(step));
        ++accepted;
      } else {
        std::printf("refused: bulk push of step %lld as worker:0: %s\n",
                    static_cast<long long>(step), link->error()->message.c_str());
      }
    }
    error.reset();
    if (bulk_link::open(host, bulk_port, run, ticket, "forger", until(), error)) {
      std::printf("ACCEPTED: a spent ticket opened a second connection\n");
      ++accepted;
    } else {
      std::printf("refused: a spent ticket: %s\n", error ? error->message.c_str() : "");
    }
  }
  for (int64_t step : {0, 3}) {
    must_refuse<push_receipt>(self, *shard, "BASP push as worker:0", push_atom::value,
                              step_push{run, 0, step, 0x5eed, 0, names, grads, {}});
    ++pushes;
  }
  std::printf("%d push(es), %d accepted\n", pushes, accepted);
  return accepted == 0 ? 0 : 1;
}

// The shard: initialise it again, read and write it without the run's id,
// push a huge finite gradient, ask for its traffic.
void ask_the_shard(caf::scoped_actor& self, const ps_shard_actor& shard) {
  tensor huge_gradient({784, 10}, 1e30f);
  must_refuse<caf::ok_atom>(self, shard, "init of the shard", init_atom::value, run_id{42},
                            std::vector<std::string>{"softmax/weights"},
                            std::vector<tensor>{tensor({784, 10})}, shard_options{});
  must_refuse<pull_reply>(self, shard, "pull of the weights", pull_atom::value,
                          pull_request{0, {"softmax/weights"}, 0, {}});
  must_refuse<push_receipt>(self, shard, "push of a huge gradient", push_atom::value,
                            step_push{0, 0, 0, 0, 0, {"softmax/weights"}, {huge_gradient}, {}});
  must_refuse<shard_traffic>(self, shard, "stats of the shard", stats_atom::value);
}

// The chief: ask for the plan (and so the run id and the token queue) under
// an index the cluster lacks and one a live worker holds; report and claim
// a non-finite gradient as worker 0. Returns the forged report.
step_report ask_the_chief(caf::scoped_actor& self, const chief_actor& chief) {
  must_refuse<training_plan>(self, chief, "ready as worker 99", ready_atom::value, int32_t{99});
  must_refuse<training_plan>(self, chief, "ready as worker 0", ready_atom::value, int32_t{0});
  step_report fake;
  fake.worker = 0;
  fake.step = 5;
  fake.applied = true;
  must_refuse<step_grant>(self, chief, "report as worker 0", report_atom::value, fake);
  must_refuse<step_grant>(self, chief, "non-finite gradient as worker 0", nonfinite_atom::value,
                          fake);
  return fake;
}

// One-way messages: their refusals show in the nodes' logs.
void tell_both(caf::scoped_actor& self, const ps_shard_actor& shard, const chief_actor& chief,
               const step_report& fake) {
  self->send(shard, replicas_atom::value, int32_t{1});
  self->send(shard, stop_atom::value);
  self->send(shard, stop_atom::value, int32_t{1}, std::string("forged abort"));
  std::printf("sent: replicas, stop and abort to the shard\n");
  self->send(chief, step_done_atom::value,
             step_summary{999999, 0, 0, 0, 0, 0, 0, {}, {}, {}, {}, {}});
  std::printf("sent: step_done to the chief\n");
  // What the chief's report channel relays in its own process: a stranger
  // does not know a connection's key.
  self->send(caf::actor_cast<caf::actor>(chief), relayed_atom::value, uint64_t{0x5eed}, uint64_t{1},
             std::vector<step_report>{fake});
  std::printf("sent: a relayed batch of reports to the chief\n");
  // Let the one-way messages leave, and their refusals name this address,
  // before the exit message costs this process its connection: kill would
  // end an actor whatever its exit handler says.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  self->send_exit(shard, caf::exit_reason::kill);
  std::printf("sent: an exit message (kill) to the shard\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

// A stranger that reached the chief's and a shard's BASP ports: every
// request refused, every one-way message ignored; exit 0 when none was
// accepted.
int impersonate(const std::string& chief_host, uint16_t chief_port, const std::string& ps_host,
                uint16_t ps_port) {
  client_config cfg;
  caf::actor_system sys{cfg};
  auto shard = sys.middleman().remote_actor<ps_shard_actor>(ps_host, ps_port);
  auto chief = sys.middleman().remote_actor<chief_actor>(chief_host, chief_port);
  if (!shard || !chief) {
    std::printf("cannot connect: %s\n", sys.render(!shard ? shard.error() : chief.error()).c_str());
    return 3;
  }
  caf::scoped_actor self{sys};
  ask_the_shard(self, *shard);
  auto fake = ask_the_chief(self, *chief);
  tell_both(self, *shard, *chief, fake);
  std::printf("%d request(s) accepted\n", accepted);
  return accepted == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--forge") {
    std::string host;
    uint16_t port = 0;
    if (!split(argv[3], host, port))
      return 2;
    return forge_pushes(std::stoull(argv[2]), host, port);
  }
  if ((argc == 4 || argc == 7) && std::string(argv[1]) == "--sweep") {
    foreign::target node{argv[2], "", 0};
    if (!split(argv[3], node.host, node.port))
      return 2;
    impostor_config cfg{argc, argv};
    caf::actor_system sys{cfg};
    return foreign::sweep_builtin_types(sys, node, argc == 7);
  }
  if (argc == 5 && std::string(argv[1]) == "--huge") {
    foreign::target node{"node", "", 0};
    if (!split(argv[4], node.host, node.port))
      return 2;
    return foreign::send_huge_frames(std::stoi(argv[2]), std::stoi(argv[3]), node);
  }
  if (argc == 5 && std::string(argv[1]) == "--hold") {
    foreign::target node{"node", "", 0};
    if (!split(argv[4], node.host, node.port))
      return 2;
    return hold_silent_connections(std::stoi(argv[2]), std::stoi(argv[3]), node);
  }
  std::string chief_host, ps_host;
  uint16_t chief_port = 0, ps_port = 0;
  if (argc != 3 || !split(argv[1], chief_host, chief_port) || !split(argv[2], ps_host, ps_port)) {
    std::fprintf(stderr, "usage: %s CHIEF_HOST:PORT PS_HOST:PORT\n", argv[0]);
    return 2;
  }
  return impersonate(chief_host, chief_port, ps_host, ps_port);
}
