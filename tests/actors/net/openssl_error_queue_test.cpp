// An error left in OpenSSL's per-thread queue by one connection must not turn
// an ordinary "would block" on another into a fatal error (see
// actors/net/openssl_error_queue.hpp).
#include <memory>

#include <boost/test/unit_test.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "actors/net/openssl_error_queue.hpp"
#include "tests/support/self_signed.hpp"

namespace {

// A client and a server connected through memory buffers, handshake done.
struct tls_pair {
  troupe::testing::self_signed_identity identity{"test"};
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL* server = nullptr;
  SSL* client = nullptr;

  tls_pair() {
    SSL_CTX_use_certificate(server_ctx, identity.cert);
    SSL_CTX_use_PrivateKey(server_ctx, identity.key);
    server = SSL_new(server_ctx);
    client = SSL_new(client_ctx);
    BIO* to_server = BIO_new(BIO_s_mem());
    BIO* to_client = BIO_new(BIO_s_mem());
    BIO_up_ref(to_server);
    BIO_up_ref(to_client);
    SSL_set_bio(client, to_client, to_server);
    SSL_set_bio(server, to_server, to_client);
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
    for (int round = 0; round < 10 && !established(); ++round) {
      SSL_do_handshake(client);
      SSL_do_handshake(server);
    }
  }
  bool established() const { return SSL_is_init_finished(client) && SSL_is_init_finished(server); }
  ~tls_pair() {
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(server_ctx);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(openssl_error_queue_tests)

BOOST_AUTO_TEST_CASE(cafs_tls_calls_go_through_the_wrappers) {
  BOOST_TEST(troupe::openssl_error_queue_problem().empty(), troupe::openssl_error_queue_problem());
}

BOOST_AUTO_TEST_CASE(a_stale_error_does_not_fail_the_next_read) {
  tls_pair tls;
  BOOST_REQUIRE(tls.established());
  char byte;
  auto ret = SSL_read(tls.client, &byte, 1);
  BOOST_TEST(SSL_get_error(tls.client, ret) == SSL_ERROR_WANT_READ); // nothing sent yet
  // What a stranger's failed handshake, or a peer closing without
  // close_notify, leaves behind in this thread when nobody drains the queue.
  ERR_raise(ERR_LIB_SSL, SSL_R_UNEXPECTED_EOF_WHILE_READING);
  ret = SSL_read(tls.client, &byte, 1);
  BOOST_TEST(SSL_get_error(tls.client, ret) == SSL_ERROR_WANT_READ);
  // And the connection still carries data.
  BOOST_TEST(SSL_write(tls.server, "x", 1) == 1);
  ERR_raise(ERR_LIB_SSL, SSL_R_WRONG_VERSION_NUMBER);
  BOOST_TEST(SSL_read(tls.client, &byte, 1) == 1);
  BOOST_TEST(byte == 'x');
}

BOOST_AUTO_TEST_SUITE_END()
