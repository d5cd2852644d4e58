#include "actors/protocol/grant_proof.hpp"

#include <random>

namespace troupe {

namespace {

constexpr uint64_t rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

struct sip_state {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

// SipHash-2-4 of whole 64-bit words (little-endian message words); the
// length byte counts their bytes, as the reference does.
uint64_t siphash24(const grant_key& key, const uint64_t* words, size_t count) {
  sip_state s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL,
              key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};
  for (size_t i = 0; i < count; ++i)
    s.absorb(words[i]);
  s.absorb(static_cast<uint64_t>(count * 8) << 56);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i)
    s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

} // namespace

grant_key grant_key::draw() {
  std::random_device entropy;
  grant_key key;
  while (key.empty()) {
    key.k0 = (static_cast<uint64_t>(entropy()) << 32) | entropy();
    key.k1 = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  }
  return key;
}

uint64_t grant_proof(const grant_key& key, run_id run, int32_t worker, int64_t step) {
  const uint64_t words[3] = {run, static_cast<uint64_t>(static_cast<uint32_t>(worker)),
                             static_cast<uint64_t>(step)};
  return siphash24(key, words, 3);
}

uint64_t step_receipt(const grant_key& key, run_id run, int32_t worker, int64_t step,
                      int32_t shard) {
  constexpr uint64_t receipt_domain = 0x7265636569707421ULL; // "receipt!": no proof has 5 words
  const uint64_t words[5] = {
    receipt_domain, run, static_cast<uint64_t>(static_cast<uint32_t>(worker)),
    static_cast<uint64_t>(step), static_cast<uint64_t>(static_cast<uint32_t>(shard))};
  return siphash24(key, words, 5);
}

} // namespace troupe
