#include "actors/net/openssl_error_queue.hpp"
#include "actors/net/next_symbol.hpp"

#include "actors/metrics/task_metrics.hpp"

#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

// Exported even where the build hides symbols by default: libcaf_openssl
// must bind to these.
#define TROUPE_INTERPOSE __attribute__((visibility("default")))

extern "C" {

TROUPE_INTERPOSE int SSL_read(SSL* ssl, void* buf, int num) {
  static auto real = troupe::next_symbol<int (*)(SSL*, void*, int)>("SSL_read", "libssl");
  ERR_clear_error();
  return real(ssl, buf, num);
}

TROUPE_INTERPOSE int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto real = troupe::next_symbol<int (*)(SSL*, const void*, int)>("SSL_write", "libssl");
  ERR_clear_error();
  return real(ssl, buf, num);
}

TROUPE_INTERPOSE int SSL_accept(SSL* ssl) {
  static auto real = troupe::next_symbol<int (*)(SSL*)>("SSL_accept", "libssl");
  ERR_clear_error();
  int ret = real(ssl);
  // A handshake that failed, not one that waits for more bytes or a peer that left.
  if (ret <= 0 && SSL_get_error(ssl, ret) == SSL_ERROR_SSL)
    troupe::metrics::tls_handshake_failures().add();
  return ret;
}

TROUPE_INTERPOSE int SSL_connect(SSL* ssl) {
  static auto real = troupe::next_symbol<int (*)(SSL*)>("SSL_connect", "libssl");
  ERR_clear_error();
  return real(ssl);
}

} // extern "C"

namespace troupe {

std::string openssl_error_queue_problem() {
  const char* names[] = {"SSL_read", "SSL_write", "SSL_accept", "SSL_connect"};
  void* ours[] = {reinterpret_cast<void*>(&SSL_read), reinterpret_cast<void*>(&SSL_write),
                  reinterpret_cast<void*>(&SSL_accept), reinterpret_cast<void*>(&SSL_connect)};
  for (size_t i = 0; i < 4; ++i)
    if (dlsym(RTLD_DEFAULT, names[i]) != ours[i])
      return std::string("libssl's ") + names[i]
             + " is not the one that clears OpenSSL's error queue first; link "
               "actors/net/openssl_error_queue.cpp into the executable";
  return {};
}

} // namespace troupe
