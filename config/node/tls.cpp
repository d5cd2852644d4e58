#include "config/node/tls.hpp"

#include <cstdio>
#include <memory>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

namespace troupe {

namespace {

std::string expand(std::string path, const node_setup& setup) {
  auto replace = [&](const std::string& what, const std::string& with) {
    for (auto at = path.find(what); at != std::string::npos; at = path.find(what, at + with.size()))
      path.replace(at, what.size(), with);
  };
  replace("{job}", setup.whole_cluster ? "local" : name_of(setup.job));
  replace("{task}", std::to_string(setup.task));
  return path;
}

std::string openssl_reason() {
  auto code = ERR_get_error();
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return code ? buf : "no reason given";
}

template <class T, void (*Free)(T*)>
using owned = std::unique_ptr<T, std::integral_constant<decltype(Free), Free>>;

struct file_closer {
  void operator()(FILE* f) const { std::fclose(f); }
};

std::unique_ptr<FILE, file_closer> open_file(const std::string& path) {
  return std::unique_ptr<FILE, file_closer>(std::fopen(path.c_str(), "r"));
}

int passphrase_callback(char* buf, int size, int, void* user) {
  auto* pass = static_cast<const std::string*>(user);
  auto n = std::min<int>(size, static_cast<int>(pass->size()));
  std::copy_n(pass->data(), n, buf);
  return n;
}

// The certificate is signed by the cluster CA (openssl.cafile or openssl.capath).
void verify_against_ca(const node_config& cfg, X509* certificate, FILE* ca_file,
                       std::vector<std::string>& errors) {
  auto& ca = cfg.openssl_cafile;
  owned<X509_STORE, X509_STORE_free> store(X509_STORE_new());
  if (ca_file) {
    owned<X509, X509_free> authority(PEM_read_X509(ca_file, nullptr, nullptr, nullptr));
    if (!authority) {
      errors.push_back("openssl.cafile: '" + ca + "' is not a PEM certificate (" + openssl_reason()
                       + ")");
      return;
    }
    X509_STORE_add_cert(store.get(), authority.get());
  } else if (X509_STORE_load_path(store.get(), cfg.openssl_capath.c_str()) != 1) {
    errors.push_back("openssl.capath: cannot read '" + cfg.openssl_capath + "' (" + openssl_reason()
                     + ")");
    return;
  }
  owned<X509_STORE_CTX, X509_STORE_CTX_free> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), certificate, nullptr);
  if (X509_verify_cert(ctx.get()) != 1)
    errors.push_back("openssl.certificate: '" + cfg.openssl_certificate
                     + "' is not signed by the cluster CA in '"
                     + (ca.empty() ? cfg.openssl_capath : ca) + "' ("
                     + X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())) + ")");
}

// The files load, the key belongs to the certificate, and the CA signed it.
void check_tls_files(const node_config& cfg, std::vector<std::string>& errors) {
  auto& cert = cfg.openssl_certificate;
  auto& key = cfg.openssl_key;
  auto& ca = cfg.openssl_cafile;
  auto size_before = errors.size();
  auto cert_file = open_file(cert), key_file = open_file(key);
  auto ca_file = ca.empty() ? nullptr : open_file(ca);
  for (auto [file, path, name] :
       {std::tuple{cert_file.get(), cert, "certificate"}, std::tuple{key_file.get(), key, "key"},
        std::tuple{ca_file.get(), ca, "cafile"}})
    if (!file && !path.empty())
      errors.push_back(std::string("openssl.") + name + ": cannot read '" + path + "'");
  if (errors.size() > size_before)
    return;
  owned<X509, X509_free> certificate(PEM_read_X509(cert_file.get(), nullptr, nullptr, nullptr));
  if (!certificate) {
    errors.push_back("openssl.certificate: '" + cert + "' is not a PEM certificate ("
                     + openssl_reason() + ")");
    return;
  }
  auto pass = cfg.openssl_passphrase;
  owned<EVP_PKEY, EVP_PKEY_free> private_key(
    PEM_read_PrivateKey(key_file.get(), nullptr, passphrase_callback, &pass));
  if (!private_key) {
    errors.push_back("openssl.key: cannot load '" + key + "' (" + openssl_reason()
                     + "); is openssl.passphrase right?");
    return;
  }
  if (X509_check_private_key(certificate.get(), private_key.get()) != 1)
    errors.push_back("openssl.key: '" + key + "' does not belong to the certificate '" + cert
                     + "'");
  verify_against_ca(cfg, certificate.get(), ca_file.get(), errors);
}

} // namespace

bool check_tls(node_config& cfg, const node_setup& setup, std::vector<std::string>& errors) {
  auto& cert = cfg.openssl_certificate;
  auto& key = cfg.openssl_key;
  auto& ca = cfg.openssl_cafile;
  bool any = !cert.empty() || !key.empty() || !ca.empty() || !cfg.openssl_capath.empty()
             || !cfg.openssl_passphrase.empty();
  if (!any)
    return false;
  cert = expand(cert, setup);
  key = expand(key, setup);
  ca = expand(ca, setup);
  auto size_before = errors.size();
  auto missing = [&](const std::string& value, const char* name) {
    if (value.empty())
      errors.push_back(std::string("openssl.") + name
                       + " is not set: mutual TLS needs openssl.certificate, openssl.key and "
                         "openssl.cafile on every task (scripts/make-certs makes them)");
  };
  missing(cert, "certificate");
  missing(key, "key");
  if (ca.empty() && cfg.openssl_capath.empty())
    missing(ca, "cafile");
  if (errors.size() == size_before)
    check_tls_files(cfg, errors);
  return true;
}

} // namespace troupe
