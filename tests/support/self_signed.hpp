#pragma once
// A throwaway TLS identity for tests and benchmarks: a P-256 key and a
// self-signed certificate for it, valid for an hour.
#include <openssl/evp.h>
#include <openssl/x509.h>

namespace troupe::testing {

struct self_signed_identity {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  bool ok = false; ///< the certificate was signed

  explicit self_signed_identity(const char* common_name) {
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    ok = X509_sign(cert, key, EVP_sha256()) > 0;
  }
  self_signed_identity(const self_signed_identity&) = delete;
  self_signed_identity& operator=(const self_signed_identity&) = delete;
  ~self_signed_identity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

} // namespace troupe::testing
