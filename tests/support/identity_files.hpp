#pragma once
// A throwaway TLS identity in files, as a node reads them: its certificate
// is also the CA both ends trust. For Boost.Test files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <boost/test/unit_test.hpp>
#include <openssl/pem.h>

#include "actors/net/channel.hpp"
#include "tests/support/self_signed.hpp"

namespace troupe::testing {

// A throwaway identity both ends present and trust, in files as a node
// reads them.
struct identity_files {
  std::string dir;
  bulk::tls_files files;
  explicit identity_files(const char* common_name = "troupe-test") {
    char name[] = "/tmp/troupe-tls-channel-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(name));
    dir = name;
    self_signed_identity id{common_name};
    BOOST_REQUIRE(id.ok);
    files = {dir + "/node.pem", dir + "/node.key", "", dir + "/node.pem", ""};
    FILE* pem = std::fopen(files.certificate.c_str(), "w");
    FILE* key = std::fopen(files.key.c_str(), "w");
    BOOST_REQUIRE(pem && key);
    BOOST_REQUIRE(PEM_write_X509(pem, id.cert) == 1);
    BOOST_REQUIRE(PEM_write_PrivateKey(key, id.key, nullptr, nullptr, 0, nullptr, nullptr) == 1);
    std::fclose(pem);
    std::fclose(key);
  }
  ~identity_files() {
    std::remove(files.certificate.c_str());
    std::remove(files.key.c_str());
    ::rmdir(dir.c_str());
  }
};

} // namespace troupe::testing
