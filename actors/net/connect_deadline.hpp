#pragma once
// CAF 0.17 connects (remote_actor, plain and TLS) with a blocking connect()
// inside its middleman actor. To an address with nobody behind it, as while
// a container or pod restarts (or through a stale ARP entry to its old
// interface), the kernel retransmits the SYN for about two minutes, and
// every later connect of the process waits behind that one in CAF's queue:
// a restarted ps was reached 34 s after it listened, or never. connect() is
// interposed (as the connection warden does accept()): a blocking TCP
// connect gives up after the deadline with ETIMEDOUT, and the caller's retry
// loop tries again, resolving the name again, so a task that came back at a
// new address is found too.
#include <chrono>
#include <string>

namespace troupe {

/// How long one blocking TCP connect() of this process may wait; 0 (the
/// default) leaves connect() as the C library has it.
void set_connect_deadline(std::chrono::milliseconds limit);

/// Empty when connect() goes through the interposer; otherwise why not.
std::string connect_deadline_problem();

} // namespace troupe
