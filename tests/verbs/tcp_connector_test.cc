// TcpConnector (the multi-process Connector), on the soft fabric so it runs
// on any machine: two Nodes of one SoftFabric, each behind its own connector
// on 127.0.0.1, exchange endpoints over real TCP.

#include "rdma/verbs/tcp_connector.h"

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "rdma/fabric.h"
#include "rdma/session.h"

namespace rdma::verbs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(ParseTcpPeers, Valid) {
  auto p = ParseTcpPeers("10.0.0.1:7471, 10.0.0.2:7472,localhost:9");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[1].host, "10.0.0.2");
  EXPECT_EQ((*p)[1].port, 7472);
  EXPECT_EQ((*p)[2].host, "localhost");
}

TEST(ParseTcpPeers, Invalid) {
  for (const char* bad : {"", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:70000", "host.example:80", "10.0.0.1:x"}) {
    EXPECT_EQ(ParseTcpPeers(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

class TcpConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FabricOptions fo;
    fo.kind = FabricKind::kSoft;
    auto f = OpenFabric(fo);
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(*f);
    for (int i = 0; i < 2; ++i) {
      NodeOptions no;
      no.arena_bytes = 1 << 20;
      auto node = Node::Create(static_cast<NodeId>(i), *fabric_->OpenDevice(static_cast<NodeId>(i)), no);
      ASSERT_TRUE(node.ok());
      nodes_[i] = std::move(*node);
    }
  }
  void TearDown() override {
    for (auto& c : conns_) c.reset();
  }
  // Both connectors on ephemeral ports, told about each other.
  void StartBoth(milliseconds connect_timeout = milliseconds(5000)) {
    for (int i = 0; i < 2; ++i) {
      TcpConnectorOptions o;
      o.peers = {TcpPeer{"127.0.0.1", 0}, TcpPeer{"127.0.0.1", 0}};
      o.connect_timeout = connect_timeout;
      auto c = TcpConnector::Create(*nodes_[i], o);
      ASSERT_TRUE(c.ok()) << c.status();
      conns_[i] = std::move(*c);
    }
    conns_[0]->SetPeer(1, {"127.0.0.1", conns_[1]->listen_port()});
    conns_[1]->SetPeer(0, {"127.0.0.1", conns_[0]->listen_port()});
  }

  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<Node> nodes_[2];
  std::unique_ptr<TcpConnector> conns_[2];
};

TEST_F(TcpConnectorTest, SessionOverTcpReachesBothNodes) {
  StartBoth();
  auto arena = conns_[1]->Arena(0);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(arena->base, nodes_[0]->arena_info().base);
  EXPECT_EQ(arena->rkey, nodes_[0]->arena_info().rkey);
  auto s = Session::Create(*nodes_[1], *conns_[1]);
  ASSERT_TRUE(s.ok()) << s.status();
  RemotePtr w = *nodes_[0]->Allocate(8);
  ASSERT_TRUE((*s)->Write64(w, 41).ok());
  EXPECT_EQ(*(*s)->FetchAndAdd(w, 1), 41u);
  EXPECT_EQ(__atomic_load_n(w.local<uint64_t>(), __ATOMIC_ACQUIRE), 42u);
  RemotePtr mine = *nodes_[1]->Allocate(8);  // loopback: no TCP involved
  EXPECT_EQ(*(*s)->CompareAndSwap(mine, 0, 5), 0u);
}

TEST_F(TcpConnectorTest, DisconnectReleasesTheResponderQp) {
  StartBoth();
  const size_t before = nodes_[1]->responder_qp_count();
  // Directly: Connect creates a responder on node 1, Disconnect destroys it.
  auto dev = fabric_->OpenDevice(0);
  ASSERT_TRUE(dev.ok());
  auto cq = (*dev)->CreateCompletionQueue(4);
  ASSERT_TRUE(cq.ok());
  auto qp = (*dev)->CreateQueuePair(cq->get(), {});
  ASSERT_TRUE(qp.ok());
  auto responder = conns_[0]->Connect(1, (*qp)->endpoint());
  ASSERT_TRUE(responder.ok()) << responder.status();
  EXPECT_EQ(nodes_[1]->responder_qp_count(), before + 1);
  ASSERT_TRUE(conns_[0]->Disconnect(1, *responder).ok());
  EXPECT_EQ(nodes_[1]->responder_qp_count(), before);
  absl::Status again = conns_[0]->Disconnect(1, *responder);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound) << again;
  EXPECT_TRUE(absl::StrContains(again.message(), "node 1 at 127.0.0.1")) << again;
  qp->reset();
  // Through a Session: closing it releases its responders on both nodes
  // (node 0 over TCP, its own node 1 locally).
  const size_t before0 = nodes_[0]->responder_qp_count();
  {
    auto s = Session::Create(*nodes_[1], *conns_[1]);
    ASSERT_TRUE(s.ok()) << s.status();
    RemotePtr w = *nodes_[0]->Allocate(8);
    ASSERT_TRUE((*s)->Write64(w, 1).ok());
    EXPECT_GT(nodes_[0]->responder_qp_count(), before0);
  }
  EXPECT_EQ(nodes_[0]->responder_qp_count(), before0);
  EXPECT_EQ(nodes_[1]->responder_qp_count(), before);
}

TEST_F(TcpConnectorTest, DisconnectFromAGonePeerIsQuick) {
  StartBoth();
  QpEndpoint ep;
  ep.qp_num = 12345;
  conns_[1].reset();  // node 1's server is gone: connection refused
  const auto t0 = Clock::now();
  absl::Status s = conns_[0]->Disconnect(1, ep);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(Clock::now() - t0, TcpConnector::kDisconnectConnectTimeout + milliseconds(1500)) << s;
}

TEST_F(TcpConnectorTest, BarrierWaitsForEveryNode) {
  StartBoth();
  absl::Status late;
  const auto t0 = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(300));
    late = conns_[1]->Barrier(7, milliseconds(5000));
  });
  absl::Status early = conns_[0]->Barrier(7, milliseconds(5000));
  t.join();
  EXPECT_TRUE(early.ok()) << early;
  EXPECT_TRUE(late.ok()) << late;
  EXPECT_GE(Clock::now() - t0, milliseconds(250));
}

TEST_F(TcpConnectorTest, BarrierTimesOutNamingTheMissingNode) {
  StartBoth();
  absl::Status s = conns_[0]->Barrier(9, milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "nodes 1 did not arrive")) << s;
}

TEST_F(TcpConnectorTest, UnreachablePeerFailsWithinTheConnectTimeout) {
  // Nothing listens on node 1's address.
  TcpConnectorOptions o;
  o.peers = {TcpPeer{"127.0.0.1", 0}, TcpPeer{"127.0.0.1", 1}};
  o.connect_timeout = milliseconds(500);
  auto c = TcpConnector::Create(*nodes_[0], o);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto t0 = Clock::now();
  absl::Status s = (*c)->Arena(1).status();
  EXPECT_LT(Clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "node 1 at 127.0.0.1:1 did not accept")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "refused")) << s;
}

TEST_F(TcpConnectorTest, PeerErrorsAreForwarded) {
  StartBoth();
  nodes_[0]->Shutdown();
  QpEndpoint ep;
  ep.node = 1;
  auto r = conns_[1]->Connect(0, ep);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "shut down")) << r.status();
}

TEST_F(TcpConnectorTest, DisagreeingPeerListsAreDetected) {
  StartBoth();
  conns_[1]->SetPeer(0, {"127.0.0.1", conns_[1]->listen_port()});  // "node 0" is really node 1
  absl::Status s = conns_[1]->Arena(0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "disagree")) << s;
}

TEST_F(TcpConnectorTest, PortInUseIsReported) {
  StartBoth();
  TcpConnectorOptions o;
  o.peers = {TcpPeer{"127.0.0.1", conns_[0]->listen_port()}, TcpPeer{"127.0.0.1", 1}};
  auto c = TcpConnector::Create(*nodes_[0], o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "cannot listen")) << c.status();
}

}  // namespace
}  // namespace rdma::verbs
