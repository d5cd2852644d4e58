#pragma once
// The bulk path's sockets: listening and connecting over TCP (non-blocking,
// TCP_NODELAY), and driving a frame to completion on one channel (plain or
// TLS, channel.hpp) within a deadline. Free of CAF.
#include <chrono>
#include <cstdint>
#include <string>

#include "actors/net/channel.hpp"
#include "actors/net/frame.hpp"

namespace troupe::bulk {

/// A listening socket on host:port (port 0: any free port, reported in
/// `port`); a failure naming the address when it cannot.
socket_fd listen_on(const std::string& host, uint16_t& port, maybe_failure& error);

/// A connected, non-blocking socket to host:port, or a failure within the deadline.
socket_fd connect_to(const std::string& host, uint16_t port, deadline until, maybe_failure& error);

/// What a chief still reading its data answers on its port before it closes
/// the connection (apps/node/chief_lobby.hpp).
constexpr const char* chief_lobby_greeting = "troupe: the chief is reading its data\n";

/// Whether host:port answers with chief_lobby_greeting within the deadline.
bool chief_is_reading(const std::string& host, uint16_t port, deadline until);

/// Makes an accepted socket non-blocking, with TCP_NODELAY.
void prepare(int fd);

/// The next connection on `listener` within `wait`, non-blocking with
/// TCP_NODELAY; invalid when none came (or the listener was shut down).
socket_fd accept_next(const socket_fd& listener, std::chrono::milliseconds wait);

/// A server's channel on an accepted socket: the TLS handshake under `tls`
/// (plain TCP without) within the deadline, on a second descriptor of the
/// socket. The channel may close its descriptor early (a failed handshake);
/// the server keeps `accepted` for the connection's life, so that the
/// number other threads shut down stays the connection's, never reused.
/// Empty, with `error` set, when the handshake fails.
channel accept_channel(const socket_fd& accepted, const tls_context* tls, deadline until,
                       maybe_failure& error);

/// A client's channel to host:port: connected, then the TLS handshake under
/// `tls` (plain TCP without), within the deadline; empty with `error` set.
channel connect_channel(const std::string& host, uint16_t port, const tls_context* tls,
                        deadline until, maybe_failure& error);

/// What a client shows in the first frame of a ticketed connection (the
/// bulk path's and the report channel's): its run, the ticket the server
/// issued for it, and a label for the server's log lines.
struct hello_fields {
  uint64_t run = 0;
  uint64_t ticket = 0;
  std::string label;
};

/// A client's ticketed connection to host:port: connect_channel, then the
/// hello, answered within the deadline by a welcome whose one field lands
/// in `welcomed` (the shard's index, or the worker the ticket names).
/// Empty, with `error` set (to the server's refusal when it refused).
channel open_ticketed(const std::string& host, uint16_t port, const tls_context* tls,
                      const hello_fields& hello, deadline until, int32_t& welcomed,
                      maybe_failure& error);

/// "host:port" of a connected socket's peer, for log lines ("?" unknown).
std::string peer_name(int fd);

/// Waits until the channel can read (or write) or the deadline passes;
/// false with `error` set on the deadline or a poll failure.
bool wait_for(const channel& ch, bool writable, deadline until, maybe_failure& error);

/// Sends the whole frame before the deadline.
maybe_failure send_frame(channel& ch, frame_writer& frame, deadline until);

/// Receives one whole frame before the deadline.
maybe_failure receive_frame(channel& ch, frame_reader& frame, deadline until);

} // namespace troupe::bulk
