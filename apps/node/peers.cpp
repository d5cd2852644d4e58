#include "apps/node/peers.hpp"

#include <algorithm>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <spdlog/spdlog.h>

#include "apps/node/process.hpp"

namespace troupe::node {

namespace {

// A hello answered: connected, or refused (another protocol version); an
// unanswered one means "try again".
template <class Handle>
caf::expected<Handle> greet(caf::actor_system& sys, const node_setup& setup, const Handle& handle) {
  // Right after a peer died, CAF may still hand out the dead one's proxy
  // (its cache is cleared asynchronously): a hello that is not answered
  // within 3 s means "try again", not "give up".
  auto wait = std::min(std::chrono::milliseconds(3000), setup.runtime.request_timeout);
  caf::scoped_actor self{sys};
  caf::expected<Handle> result{caf::sec::request_timeout};
  self
    ->request(handle, wait, hello_atom::value, protocol_version, std::string(name_of(setup.job)),
              setup.task)
    .receive([&](uint32_t) { result = handle; }, [&](caf::error& err) { result = std::move(err); });
  return result;
}

void sleep_unless_stopped(std::chrono::milliseconds backoff) {
  for (auto slept = std::chrono::milliseconds(0); slept < backoff && !sigterm_arrived();
       slept += std::chrono::milliseconds(50))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

template <class Handle>
caf::expected<Handle> connect_to(caf::actor_system& sys, const node_setup& setup,
                                 const std::string& what, const host_port& address,
                                 std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  auto backoff = std::chrono::milliseconds(100);
  caf::error last;
  for (;;) {
    // A chief told to stop while it waits (Kubernetes' grace period runs) stops waiting.
    if (sigterm_arrived())
      return make_error({errc::training_stopped, "stopped by SIGTERM while waiting for the " + what
                                                   + " at " + address.to_string()});
    auto handle = setup.tls ? caf::openssl::remote_actor<Handle>(sys, address.host, address.port)
                            : sys.middleman().remote_actor<Handle>(address.host, address.port);
    if (handle) {
      auto result = greet(sys, setup, *handle);
      if (result || result.error().category() == caf::atom("troupe"))
        return result;
      last = result.error();
    } else {
      last = handle.error();
    }
    if (last == caf::sec::unexpected_actor_messaging_interface)
      return caf::make_error(caf::sec::unexpected_actor_messaging_interface,
                             what + " at " + address.to_string() + " is not a Troupe " + what
                               + " of this release");
    if (std::chrono::steady_clock::now() + backoff > deadline)
      break;
    spdlog::debug("waiting for {} at {}: {}", what, address.to_string(), sys.render(last));
    sleep_unless_stopped(backoff);
    backoff = std::min(backoff * 3 / 2, std::chrono::milliseconds(1000));
  }
  // A chief that still reads its data holds its port, greets each
  // connection with a line and closes it (chief_lobby.hpp): CAF sees a
  // malformed header or a disconnect.
  auto lobby = last == caf::sec::malformed_basp_message
               || last == caf::sec::disconnect_during_handshake;
  auto hint =
    lobby && what == "chief"
      ? "; the port answered and closed each connection, as a chief still reading its data "
        "does: raise cluster.connect-timeout to cover the read"
      : "; is that task running and listening there?";
  return caf::make_error(caf::sec::cannot_connect_to_node,
                         "no " + what + " reachable at " + address.to_string() + " within "
                           + std::to_string(within.count()) + " ms: " + sys.render(last) + hint);
}

} // namespace

caf::expected<chief_actor> connect_to_chief(caf::actor_system& sys, const node_setup& setup,
                                            std::chrono::milliseconds within) {
  return connect_to<chief_actor>(sys, setup, "chief", setup.cluster.chief[0], within);
}

caf::expected<ps_shard_actor> connect_to_shard(caf::actor_system& sys, const node_setup& setup,
                                               size_t shard, std::chrono::milliseconds within) {
  return connect_to<ps_shard_actor>(sys, setup, "ps shard", setup.cluster.ps.at(shard), within);
}

bool connect_shards(caf::actor_system& sys, const node_setup& setup,
                    std::vector<ps_shard_actor>& shards) {
  for (size_t i = 0; i < setup.cluster.ps.size(); ++i) {
    auto shard = connect_to_shard(sys, setup, i, setup.runtime.connect_timeout);
    if (!shard) {
      spdlog::error("ps:{}: {}", i, describe(shard.error()));
      return false;
    }
    shards.push_back(*shard);
  }
  return true;
}

peer_reconnect reconnect_to_peers(caf::actor_system& sys, const node_setup& setup) {
  peer_reconnect out;
  out.chief = [&sys, setup](std::chrono::milliseconds within) {
    return connect_to_chief(sys, setup, within);
  };
  out.shard = [&sys, setup](int32_t shard, std::chrono::milliseconds within) {
    return connect_to_shard(sys, setup, static_cast<size_t>(shard), within);
  };
  return out;
}

namespace {

template <class Handle>
bool publish_typed(caf::actor_system& sys, const node_setup& setup, const Handle& handle,
                   const host_port& address) {
  auto port = setup.tls ? caf::openssl::publish(handle, address.port, address.host.c_str(), true)
                        : sys.middleman().publish(handle, address.port, address.host.c_str(), true);
  if (!port) {
    spdlog::error("cannot listen on {}: {}; is the port in use or the host not an address of "
                  "this machine?",
                  address.to_string(), sys.render(port.error()));
    return false;
  }
  spdlog::info("listening on {}{}", address.to_string(), setup.tls ? " (mutual TLS)" : "");
  return true;
}

} // namespace

bool publish(caf::actor_system& sys, const node_setup& setup, const ps_shard_actor& shard,
             const host_port& address) {
  return publish_typed(sys, setup, shard, address);
}

bool publish(caf::actor_system& sys, const node_setup& setup, const chief_actor& chief,
             const host_port& address) {
  return publish_typed(sys, setup, chief, address);
}

// check_tls read the files already, so only a file changed since can fail here.
std::optional<bulk_path> bulk_path_of(const node_config& cfg, const node_setup& setup) {
  bulk_path out{setup.runtime.bulk_path, nullptr};
  if (!out.on || !setup.tls)
    return out;
  maybe_failure error;
  out.tls = bulk::tls_context::make({cfg.openssl_certificate, cfg.openssl_key,
                                     cfg.openssl_passphrase, cfg.openssl_cafile,
                                     cfg.openssl_capath},
                                    error);
  if (!out.tls) {
    spdlog::error("{}", error ? error->message : "bulk path TLS failed");
    return std::nullopt;
  }
  return out;
}

bulk_peers bulk_peers_of(const node_setup& setup, const bulk_path& bulk) {
  bulk_peers peers;
  if (bulk.on) {
    for (auto& address : setup.cluster.ps)
      peers.shard_hosts.push_back(address.host);
    peers.tls = bulk.tls;
    if (!setup.cluster.chief.empty())
      peers.chief_host = setup.cluster.chief.front().host;
  }
  return peers;
}

} // namespace troupe::node
