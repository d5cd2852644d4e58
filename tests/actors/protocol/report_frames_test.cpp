// The report channel's fields: reports and grants come back as written
// (every member, a NaN loss bit for bit), and counts outside the bound,
// flags other than 0 and 1, and fields left over or missing are refused.
#include <cmath>
#include <cstring>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "actors/protocol/report_frames.hpp"

using namespace troupe;

namespace {

step_report sample(int64_t step, double loss) {
  step_report r;
  r.run = 0x1122334455667788u;
  r.worker = 3;
  r.step = step;
  r.applied = step % 2 == 0;
  r.loss = loss;
  r.correct = 17;
  r.examples = 100;
  r.data_epoch = 2;
  r.data_offset = 4096;
  r.share_rank = 1;
  r.share_count = 4;
  r.receipt = 0xa5a5a5a5a5a5a5a5u ^ static_cast<uint64_t>(step);
  return r;
}

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

} // namespace

BOOST_AUTO_TEST_SUITE(report_frames)

BOOST_AUTO_TEST_CASE(reports_and_grants_round_trip) {
  std::vector<step_report> sent{sample(-1, 0.0), sample(41, 0.25),
                                sample(42, std::numeric_limits<double>::quiet_NaN())};
  bulk::meta_writer out;
  write_reports(out, sent);
  bulk::meta_reader in{out.bytes()};
  std::vector<shape_t> shapes;
  BOOST_REQUIRE(!in.shapes(shapes, 0, {}));
  std::vector<step_report> got;
  BOOST_REQUIRE(read_reports(in, 3, got));
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_CHECK_EQUAL(got[i].run, sent[i].run);
    BOOST_CHECK_EQUAL(got[i].worker, sent[i].worker);
    BOOST_CHECK_EQUAL(got[i].step, sent[i].step);
    BOOST_CHECK_EQUAL(got[i].applied, sent[i].applied);
    BOOST_CHECK_EQUAL(bits(got[i].loss), bits(sent[i].loss));
    BOOST_CHECK_EQUAL(got[i].correct, sent[i].correct);
    BOOST_CHECK_EQUAL(got[i].examples, sent[i].examples);
    BOOST_CHECK_EQUAL(got[i].data_epoch, sent[i].data_epoch);
    BOOST_CHECK_EQUAL(got[i].data_offset, sent[i].data_offset);
    BOOST_CHECK_EQUAL(got[i].share_rank, sent[i].share_rank);
    BOOST_CHECK_EQUAL(got[i].share_count, sent[i].share_count);
    BOOST_CHECK_EQUAL(got[i].receipt, sent[i].receipt);
  }
  std::vector<step_grant> grants{{7, false, 99}, {0, true, 0}};
  bulk::meta_writer gout;
  write_grants(gout, grants);
  bulk::meta_reader gin{gout.bytes()};
  std::vector<shape_t> none;
  BOOST_REQUIRE(!gin.shapes(none, 0, {}));
  std::vector<step_grant> back;
  BOOST_REQUIRE(read_grants(gin, 2, back));
  BOOST_REQUIRE_EQUAL(back.size(), 2u);
  BOOST_CHECK_EQUAL(back[0].step, 7);
  BOOST_CHECK(!back[0].stop);
  BOOST_CHECK_EQUAL(back[0].proof, 99u);
  BOOST_CHECK(back[1].stop);
}

BOOST_AUTO_TEST_CASE(bad_fields_are_refused) {
  auto refused_reports = [](const std::string& bytes, size_t most) {
    bulk::meta_reader in{bytes};
    std::vector<shape_t> none;
    BOOST_REQUIRE(!in.shapes(none, 0, {}));
    std::vector<step_report> got;
    bool ok = read_reports(in, most, got);
    return !ok && got.empty();
  };
  bulk::meta_writer three;
  write_reports(three, {sample(1, 0), sample(2, 0), sample(3, 0)});
  BOOST_CHECK(refused_reports(three.bytes(), 2)); // beyond the lease
  bulk::meta_writer none;
  write_reports(none, {});
  BOOST_CHECK(refused_reports(none.bytes(), 2)); // a batch holds at least one
  BOOST_CHECK(refused_reports(three.bytes().substr(0, three.bytes().size() - 1), 3)); // cut
  BOOST_CHECK(refused_reports(three.bytes() + "x", 3));                               // left over
  bulk::meta_writer negative;
  negative.i32(-1);
  BOOST_CHECK(refused_reports(negative.bytes(), 3));
  // The applied flag of the first report: after the count (4), run (8),
  // worker (4) and step (8), behind the empty shape list.
  std::string flag = three.bytes();
  size_t at = bulk::meta_writer{}.bytes().size() + 4 + 8 + 4 + 8;
  flag[at] = 2;
  BOOST_CHECK(refused_reports(flag, 3));

  bulk::meta_writer grants;
  write_grants(grants, {{1, false, 2}});
  std::string stop = grants.bytes();
  stop[bulk::meta_writer{}.bytes().size() + 4 + 8] = 5;
  for (auto& bytes : {stop, grants.bytes() + "y"}) {
    bulk::meta_reader in{bytes};
    std::vector<shape_t> shapes;
    BOOST_REQUIRE(!in.shapes(shapes, 0, {}));
    std::vector<step_grant> got;
    BOOST_CHECK(!read_grants(in, 4, got));
    BOOST_CHECK(got.empty());
  }
}

BOOST_AUTO_TEST_SUITE_END()
