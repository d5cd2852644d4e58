#include "actors/net/record_cipher.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace troupe::bulk {

namespace {

failure broken(std::string what) {
  return {errc::unauthorized, "bulk connection: " + std::move(what)};
}

} // namespace

void record_cipher::context_free::operator()(EVP_CIPHER_CTX* ctx) const noexcept {
  EVP_CIPHER_CTX_free(ctx);
}

record_cipher::record_cipher(bool sealing, key_source keys, record_limits per_key)
  : sealing_(sealing), keys_(std::move(keys)), per_key_(per_key), ctx_(EVP_CIPHER_CTX_new()) {
}

record_cipher::record_cipher(record_cipher&&) noexcept = default;
record_cipher& record_cipher::operator=(record_cipher&&) noexcept = default;
record_cipher::~record_cipher() = default;

bool record_cipher::next_nonce(size_t payload, unsigned char* nonce, maybe_failure& error) {
  if (!ctx_) {
    error = broken("no cipher context (out of memory)");
    return false;
  }
  if (generation_ == 0 || records_ == per_key_.records || bytes_ + payload > per_key_.bytes) {
    unsigned char key_and_iv[key_bytes + iv_bytes];
    bool keyed = keys_ && keys_(generation_, key_and_iv)
                 && EVP_CipherInit_ex(ctx_.get(), EVP_aes_128_gcm(), nullptr, key_and_iv, nullptr,
                                      sealing_ ? 1 : 0)
                      == 1;
    if (keyed)
      std::memcpy(iv_, key_and_iv + key_bytes, iv_bytes);
    OPENSSL_cleanse(key_and_iv, sizeof(key_and_iv));
    if (!keyed) {
      error = broken("no record key for generation " + std::to_string(generation_));
      return false;
    }
    ++generation_;
    records_ = 0;
    bytes_ = 0;
  }
  std::memcpy(nonce, iv_, iv_bytes);
  for (int i = 0; i < 8; ++i) // the sequence number, big-endian, into the IV's last 8 bytes
    nonce[iv_bytes - 1 - i] ^= static_cast<unsigned char>(records_ >> (8 * i));
  ++records_;
  bytes_ += payload;
  return true;
}

bool record_cipher::seal(const iovec* chunks, size_t count, size_t payload, wire_buffer& out,
                         maybe_failure& error) {
  if (payload == 0 || payload > max_payload) {
    error = broken("a record of " + std::to_string(payload) + " bytes (1 to "
                   + std::to_string(max_payload) + ")");
    return false;
  }
  unsigned char nonce[iv_bytes];
  if (!next_nonce(payload, nonce, error))
    return false;
  size_t at = out.size();
  try {
    out.resize(at + header_bytes + payload + tag_bytes);
  } catch (const std::bad_alloc&) {
    error = broken("no memory for a record of " + std::to_string(payload) + " bytes");
    return false;
  }
  auto* header = reinterpret_cast<unsigned char*>(out.data() + at);
  for (size_t i = 0; i < header_bytes; ++i)
    header[i] = static_cast<unsigned char>(payload >> (8 * (header_bytes - 1 - i)));
  auto* ctx = ctx_.get();
  int n = 0;
  bool ok = EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) == 1
            && EVP_EncryptUpdate(ctx, nullptr, &n, header, header_bytes) == 1;
  unsigned char* into = header + header_bytes;
  size_t left = payload;
  for (size_t i = 0; ok && i < count && left > 0; ++i) {
    size_t take = std::min(left, chunks[i].iov_len);
    // GCM is a stream mode: every byte in gives a byte out, at once.
    ok = EVP_EncryptUpdate(ctx, into, &n, static_cast<const unsigned char*>(chunks[i].iov_base),
                           static_cast<int>(take))
           == 1
         && static_cast<size_t>(n) == take;
    into += take;
    left -= take;
  }
  ok = ok && left == 0 && EVP_EncryptFinal_ex(ctx, into, &n) == 1 && n == 0
       && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, tag_bytes, into) == 1;
  if (!ok) {
    out.resize(at);
    error = broken("sealing a record failed");
  }
  return ok;
}

std::optional<size_t> record_cipher::payload_length(const char* header, maybe_failure& error) {
  auto* h = reinterpret_cast<const unsigned char*>(header);
  size_t payload = 0;
  for (size_t i = 0; i < header_bytes; ++i)
    payload = (payload << 8) | h[i];
  if (payload >= 1 && payload <= max_payload)
    return payload;
  // A TLS record where one of ours belongs: the peer's TLS still speaks
  // (an alert: it refused this session after all), or it is no Troupe node.
  bool tls = (h[0] == 0x15 || h[0] == 0x17) && h[1] == 0x03;
  error = broken(tls ? std::string("the peer sent a TLS record where a Troupe record belongs (it "
                                   "refused the session, or runs another Troupe version)")
                     : "a record announces " + std::to_string(payload) + " bytes (1 to "
                         + std::to_string(max_payload)
                         + "): not a Troupe peer, or the stream was altered");
  return std::nullopt;
}

bool record_cipher::open(char* record, size_t payload, char* into, maybe_failure& error) {
  unsigned char nonce[iv_bytes];
  if (!next_nonce(payload, nonce, error))
    return false;
  auto* header = reinterpret_cast<unsigned char*>(record);
  unsigned char* body = header + header_bytes;
  auto* plain = into ? reinterpret_cast<unsigned char*>(into) : body;
  auto* ctx = ctx_.get();
  int n = 0;
  bool ok = EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) == 1
            && EVP_DecryptUpdate(ctx, nullptr, &n, header, header_bytes) == 1
            && EVP_DecryptUpdate(ctx, plain, &n, body, static_cast<int>(payload)) == 1
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, tag_bytes, body + payload) == 1
            && EVP_DecryptFinal_ex(ctx, plain + payload, &n) == 1;
  if (!ok)
    error = broken("a record failed its integrity check (altered, replayed or out of order): "
                   "the connection is closed");
  return ok;
}

} // namespace troupe::bulk
