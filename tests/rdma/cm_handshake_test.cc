// The rdma_cm handshake's bytes and decisions (rdma/cm/handshake.h), without
// a device: what a responder refuses and why, what an initiator refuses in a
// reply, and that every message fits rdma_cm's private-data limits.

#include "rdma/cm/handshake.h"

#include <string>

#include "gtest/gtest.h"

namespace rdma::cm {
namespace {

ConnectRequest Request() {
  ConnectRequest r;
  r.kind = ConnectionKind::kData;
  r.from = 2;
  r.to = 1;
  r.job_hash = JobHash("svc");
  r.from_incarnation = 22;
  r.to_incarnation = 11;
  r.qp_num = 0x1234;
  r.psn = 0xabcdef;
  r.lid = 7;
  return r;
}

ResponderView Node1() {
  ResponderView v;
  v.self = 1;
  v.job_hash = JobHash("svc");
  v.incarnation = 11;
  v.card_incarnation_of_from = 22;
  v.num_nodes = 3;
  return v;
}

TEST(CmHandshake, RequestRoundTripsAndFitsTheConnectLimit) {
  const std::string wire = EncodeRequest(Request());
  EXPECT_LE(wire.size(), kMaxConnectPrivateData);
  auto back = DecodeRequest(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->from, 2);
  EXPECT_EQ(back->to, 1);
  EXPECT_EQ(back->qp_num, 0x1234u);
  EXPECT_EQ(back->psn, 0xabcdefu);
  EXPECT_EQ(back->lid, 7);
  EXPECT_EQ(back->to_incarnation, 11u);
  EXPECT_TRUE(CheckRequest(*back, Node1()).ok());
}

TEST(CmHandshake, ResponderRefusesAnotherJobNamingIt) {
  ConnectRequest r = Request();
  r.job_hash = JobHash("other-service");
  absl::Status s = CheckRequest(r, Node1());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("another job"), std::string::npos) << s;
  EXPECT_NE(s.message().find("RDMADS_CLUSTER"), std::string::npos) << s;
}

TEST(CmHandshake, ResponderRefusesAWrongTargetAndAnUnknownSender) {
  ConnectRequest r = Request();
  r.to = 0;
  EXPECT_NE(CheckRequest(r, Node1()).message().find("reached node 1"), std::string::npos);
  r = Request();
  r.from = 5;
  EXPECT_NE(CheckRequest(r, Node1()).message().find("has 3 nodes"), std::string::npos);
}

TEST(CmHandshake, RestartedProcessesAreRefusedOnBothSides) {
  ConnectRequest r = Request();
  r.to_incarnation = 99;  // node 1 restarted since the initiator bootstrapped
  absl::Status s = CheckRequest(r, Node1());
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_NE(s.message().find("restarted"), std::string::npos) << s;
  r = Request();
  r.from_incarnation = 98;  // the initiator restarted
  s = CheckRequest(r, Node1());
  EXPECT_NE(s.message().find("node 2 is another incarnation"), std::string::npos) << s;
}

// Every refusal holds for control connections as for data ones: a restarted
// or duplicate process of a rank (another incarnation than its card's) gets
// no control connection either, so the responder never tracks one whose
// loss could be taken for the live process's death.
TEST(CmHandshake, EveryRefusalHoldsForBothKinds) {
  for (ConnectionKind kind : {ConnectionKind::kControl, ConnectionKind::kData}) {
    SCOPED_TRACE(kind == ConnectionKind::kControl ? "control" : "data");
    ConnectRequest good = Request();
    good.kind = kind;
    good.qp_num = kind == ConnectionKind::kControl ? 0 : good.qp_num;
    EXPECT_TRUE(CheckRequest(good, Node1()).ok());
    ConnectRequest r = good;
    r.job_hash = JobHash("other");
    EXPECT_TRUE(absl::IsFailedPrecondition(CheckRequest(r, Node1())));
    r = good;
    r.to = 0;
    EXPECT_TRUE(absl::IsFailedPrecondition(CheckRequest(r, Node1())));
    r = good;
    r.from = 3;
    EXPECT_TRUE(absl::IsFailedPrecondition(CheckRequest(r, Node1())));
    r = good;
    r.to_incarnation = 12;  // the responder restarted
    EXPECT_TRUE(absl::IsFailedPrecondition(CheckRequest(r, Node1())));
    r = good;
    r.from_incarnation = 23;  // a restarted or duplicate process of rank 2
    absl::Status s = CheckRequest(r, Node1());
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find("node 2 is another incarnation"), std::string::npos) << s;
  }
}

TEST(CmHandshake, ADataRequestMustNameItsQp) {
  ConnectRequest r = Request();
  r.qp_num = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckRequest(r, Node1())));
}

TEST(CmHandshake, ForeignBytesAreNotARequest) {
  std::string wire = EncodeRequest(Request());
  std::string other = wire;
  other[0] ^= 0x5a;
  EXPECT_NE(DecodeRequest(other).status().message().find("magic"), std::string::npos);
  other = wire;
  other[4] = 9;  // version
  EXPECT_NE(DecodeRequest(other).status().message().find("same build"), std::string::npos);
  EXPECT_NE(DecodeRequest(wire.substr(0, 20)).status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(DecodeRequest("").ok());
  // A card is not a request.
  EXPECT_NE(DecodeRequest(EncodeCard(NodeCard{})).status().message().find("another kind"), std::string::npos);
}

TEST(CmHandshake, AcceptRoundTripsAndIsCheckedAgainstTheCard) {
  NodeCard card;
  card.node = 1;
  card.incarnation = 11;
  card.address = "10.0.0.2";
  card.cm_port = 40000;
  card.arena = ArenaInfo{1, 0x7f0000000000, 4 << 20, 0x55};
  AcceptReply a;
  a.node = 1;
  a.incarnation = 11;
  a.responder.qp_num = 77;
  a.responder.psn = 5;
  a.responder.gid[15] = 9;
  a.arena = card.arena;
  const std::string wire = EncodeAccept(a);
  EXPECT_LE(wire.size(), kMaxAcceptPrivateData);
  auto back = DecodeAccept(wire);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->responder.qp_num, 77u);
  EXPECT_EQ(back->responder.node, 1);
  EXPECT_EQ(back->responder.gid[15], 9);
  EXPECT_TRUE(CheckAccept(*back, card).ok());
  back->incarnation = 12;
  EXPECT_NE(CheckAccept(*back, card).message().find("another incarnation"), std::string::npos);
  back->incarnation = 11;
  back->arena.rkey = 1;
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckAccept(*back, card)));
}

TEST(CmHandshake, CardRoundTrips) {
  NodeCard c;
  c.node = 3;
  c.job_hash = JobHash("j");
  c.incarnation = 5;
  c.address = "fe80::1";
  c.cm_port = 1234;
  c.arena = ArenaInfo{3, 1, 2, 3};
  auto back = DecodeCard(EncodeCard(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, "fe80::1");
  EXPECT_EQ(back->cm_port, 1234);
  EXPECT_EQ(back->arena.rkey, 3u);
  EXPECT_FALSE(DecodeCard(EncodeCard(c).substr(0, 30)).ok());
}

TEST(CmHandshake, RejectCarriesTheReasonAndFits) {
  absl::Status why = absl::FailedPreconditionError(std::string(400, 'x'));
  const std::string wire = EncodeReject(why);
  EXPECT_LE(wire.size(), kMaxRejectPrivateData);
  absl::Status back = DecodeReject(wire, "node 2 (10.0.0.3:1)");
  EXPECT_TRUE(absl::IsFailedPrecondition(back));
  EXPECT_NE(back.message().find("node 2 (10.0.0.3:1) refused"), std::string::npos);
  // A reject without our bytes (nothing listening there) is Unavailable.
  EXPECT_TRUE(IsOurReject(wire));
  EXPECT_FALSE(IsOurReject(std::string(148, '\0')));  // the CM's own reject: zeros
  absl::Status kernel = DecodeReject("", "node 2");
  EXPECT_TRUE(absl::IsUnavailable(kernel));
  EXPECT_NE(kernel.message().find("nothing listens"), std::string::npos);
}

TEST(CmHandshake, IncarnationsDiffer) { EXPECT_NE(NewIncarnation(), NewIncarnation()); }

}  // namespace
}  // namespace rdma::cm
