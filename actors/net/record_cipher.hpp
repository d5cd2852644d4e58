#pragma once
// The records of a bulk connection under TLS, once its handshake is done
// (TLS 1.3, both peers checked against the cluster CA): frames travel in
// records of up to 256 KiB sealed with AES-128-GCM, one key and IV per
// direction exported from that handshake (RFC 8446 section 7.5), each
// record's nonce its sequence number XORed into the IV as in TLS 1.3's own
// records. Why not TLS's records: they hold at most 16 KiB, so a 31 KB push
// was two or more records, each paying OpenSSL's per-record and per-call
// costs beside AES, and the reader copied every byte out of OpenSSL's buffer;
// here one record holds a whole frame and is opened where it landed.
//
// A record: [payload length, 4 bytes big-endian, the AAD][ciphertext][tag,
// 16 bytes]. Under one key go at most 2^24 records and 2^36 bytes (TLS 1.3's
// margin for AES-GCM is 2^24.5 records of 16 KiB); then both ends take the
// next generation's key, exported afresh, without a message. Free of CAF.
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "actors/net/wire_buffer.hpp"
#include "tensor/core/error.hpp"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace troupe::bulk {

/// When one key of a record_cipher has done enough.
struct record_limits {
  uint64_t records = uint64_t{1} << 24;
  uint64_t bytes = uint64_t{1} << 36;
};

class record_cipher {
public:
  static constexpr size_t key_bytes = 16;
  static constexpr size_t iv_bytes = 12;
  static constexpr size_t tag_bytes = 16;
  static constexpr size_t header_bytes = 4;
  static constexpr size_t max_payload = size_t{256} << 10;

  /// Fills key_bytes + iv_bytes for a generation of this direction's keys;
  /// false when it cannot.
  using key_source = std::function<bool(uint64_t generation, unsigned char* key_and_iv)>;

  /// `sealing`: this end writes the direction; otherwise it reads it.
  record_cipher(bool sealing, key_source keys, record_limits per_key = {});
  record_cipher(record_cipher&&) noexcept;
  record_cipher& operator=(record_cipher&&) noexcept;
  ~record_cipher();

  /// Appends one record holding the first `payload` bytes of the chunks
  /// (1 to max_payload) to `out`.
  bool seal(const iovec* chunks, size_t count, size_t payload, wire_buffer& out,
            maybe_failure& error);
  /// The payload length a record's header announces, checked against its
  /// range; nullopt with `error` naming what came instead.
  static std::optional<size_t> payload_length(const char* header, maybe_failure& error);
  /// Opens a whole record at `record` (its header announcing `payload`
  /// bytes): its plaintext goes to `into`, or stays in place (at record +
  /// header_bytes) when `into` is null. A failure when the record is not
  /// the peer's next one, unaltered; `into` then holds no plaintext to use.
  bool open(char* record, size_t payload, char* into, maybe_failure& error);

private:
  // The nonce of the next record, after taking the next key when this one
  // has done enough for `payload` more bytes.
  bool next_nonce(size_t payload, unsigned char* nonce, maybe_failure& error);
  struct context_free {
    void operator()(EVP_CIPHER_CTX* ctx) const noexcept;
  };
  bool sealing_;
  key_source keys_;
  record_limits per_key_;
  std::unique_ptr<EVP_CIPHER_CTX, context_free> ctx_;
  unsigned char iv_[iv_bytes] = {};
  uint64_t generation_ = 0; ///< of the key in use; 0 before the first
  uint64_t records_ = 0;    ///< under the key in use
  uint64_t bytes_ = 0;
};

} // namespace troupe::bulk
