// Grant proofs (actors/protocol/grant_proof.hpp): SipHash-2-4 as its
// reference computes it, and a proof that changes with each of its inputs.
#include <boost/test/unit_test.hpp>

#include "actors/protocol/grant_proof.hpp"

using namespace troupe;

namespace {
// The reference key 00 01 .. 0f as two little-endian words.
const grant_key reference{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
} // namespace

BOOST_AUTO_TEST_SUITE(grant_proofs)

// The value the reference implementation (checked against the paper's
// a129ca6149be45e5 for bytes 00..0e) gives for the 24 bytes
// (7, 3, 42) as little-endian 64-bit words.
BOOST_AUTO_TEST_CASE(is_siphash_2_4_of_run_worker_and_step) {
  BOOST_TEST(grant_proof(reference, 7, 3, 42) == 0x42d1f1de5723d6e3ULL);
}

BOOST_AUTO_TEST_CASE(changes_with_every_input_and_the_key) {
  auto base = grant_proof(reference, 7, 3, 42);
  BOOST_TEST(grant_proof(reference, 8, 3, 42) != base);
  BOOST_TEST(grant_proof(reference, 7, 4, 42) != base);
  BOOST_TEST(grant_proof(reference, 7, 3, 43) != base);
  BOOST_TEST(grant_proof({reference.k0 ^ 1, reference.k1}, 7, 3, 42) != base);
  BOOST_TEST(grant_proof({reference.k0, reference.k1 ^ 1}, 7, 3, 42) != base);
}

BOOST_AUTO_TEST_CASE(keys_are_drawn_fresh_and_never_empty) {
  auto a = grant_key::draw();
  auto b = grant_key::draw();
  BOOST_TEST(!a.empty());
  BOOST_TEST((a.k0 != b.k0 || a.k1 != b.k1));
}

BOOST_AUTO_TEST_CASE(a_signer_signs_grants_for_their_worker_and_not_stops) {
  grant_signer signer{reference, 7};
  auto g = signer.grant(3, 42);
  BOOST_TEST(g.step == 42);
  BOOST_TEST(!g.stop);
  BOOST_TEST(g.proof == grant_proof(reference, 7, 3, 42));
  BOOST_TEST(signer.sign(3, step_grant{42, false, 0}).proof == g.proof);
  BOOST_TEST(signer.sign(3, step_grant{42, true, 0}).proof == 0u);
}

// A shard's receipt is keyed like a proof but in a domain of its own: a
// worker's proof of a step is not a receipt for it. A report's combined
// receipt must hold every step shard's, for that worker and step.
BOOST_AUTO_TEST_CASE(receipts_prove_an_applied_step_only_with_every_shards) {
  auto receipt = step_receipt(reference, 7, 3, 42, 0);
  BOOST_TEST(receipt != grant_proof(reference, 7, 3, 42));
  BOOST_TEST(step_receipt(reference, 7, 3, 42, 1) != receipt);
  BOOST_TEST(step_receipt(reference, 7, 4, 42, 0) != receipt);
  BOOST_TEST(step_receipt(reference, 7, 3, 43, 0) != receipt);
  step_receipts receipts{reference, 7, {0, 2}};
  step_report r;
  r.run = 7;
  r.worker = 3;
  r.step = 42;
  r.applied = true;
  r.receipt = receipt ^ step_receipt(reference, 7, 3, 42, 2);
  BOOST_TEST(receipts.proven(r));
  r.receipt = receipt; // ps:2's missing: it did not push there
  BOOST_TEST(!receipts.proven(r));
  r.receipt = 0;
  BOOST_TEST(!receipts.proven(r));
  r.applied = false; // nothing claimed, nothing to prove
  BOOST_TEST(receipts.proven(r));
  r.applied = true;
  r.step = -1; // an ask
  BOOST_TEST(receipts.proven(r));
  BOOST_TEST(step_receipts{}.proven(step_report{7, 3, 42, true}));
}

BOOST_AUTO_TEST_SUITE_END()
