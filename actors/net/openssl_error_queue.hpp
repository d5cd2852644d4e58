#pragma once
// CAF 0.17's OpenSSL transport asks SSL_get_error() about every non-blocking
// read and write, but drains OpenSSL's per-thread error queue only inside a
// log statement, which Debian's CAF build compiles out (CAF_LOG_LEVEL QUIET).
// One failed handshake (a stranger sending plain BASP or garbage to a TLS
// port) or one peer closing without close_notify leaves an error in the
// multiplexer thread's queue, and the next ordinary "would block" on any
// other connection then reads as a fatal error: a healthy link to the chief
// or a shard is dropped. OpenSSL's documented rule is to clear the queue
// before each TLS I/O call; this file does that for CAF's calls by
// interposing SSL_read, SSL_write, SSL_accept and SSL_connect in the process
// (the definitions in the executable come first in symbol lookup) and
// forwarding to libssl's own.
#include <string>

namespace troupe {

/// Empty when CAF's TLS calls go through the wrappers above; otherwise why
/// not (then TLS connections can be dropped by a stranger's handshake).
std::string openssl_error_queue_problem();

} // namespace troupe
