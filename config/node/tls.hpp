#pragma once
// Mutual TLS for a node: the [openssl] section, checked before anything
// starts. CAF's OpenSSL module turns on peer verification on both sides as
// soon as any of its keys is set, but it aborts the process lazily on a
// missing certificate or a wrong passphrase; these checks find both first.
// Paths may contain {job} and {task}, so that one file serves every task:
//   certificate = "certs/{job}-{task}.pem"
#include <string>
#include <vector>

#include "config/node/node_config.hpp"

namespace troupe {

/// Expands {job} and {task} in cfg's [openssl] paths for this node, then
/// checks them: either no key is set (plain TCP), or certificate, key and
/// cafile (or capath) all are; the files can be read; the key matches the
/// certificate (with the passphrase, if any); and the certificate is signed
/// by the cluster CA. Appends one error per problem, naming key and fix.
/// Returns whether TLS is on.
bool check_tls(node_config& cfg, const node_setup& setup, std::vector<std::string>& errors);

} // namespace troupe
