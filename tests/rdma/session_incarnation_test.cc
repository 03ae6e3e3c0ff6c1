// A Session reaches only the processes it connected to (rdma/session.h): once
// its Connector says a node is another process (Connector::Incarnation
// changed: the node rejoined), the session's operations to that node and its
// Reconnect return Unavailable and nothing it posts lands there; a new
// Session reaches the node. Here the in-process cluster stands for the nodes
// and a forwarding connector plays the rejoin.
#include <atomic>
#include <memory>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/session.h"

namespace rdma {
namespace {

class RejoiningConnector final : public Connector {
 public:
  explicit RejoiningConnector(Cluster& c) : c_(c) {}
  int num_nodes() const override { return c_.num_nodes(); }
  absl::StatusOr<QpEndpoint> Connect(NodeId t, const QpEndpoint& i) override { return c_.Connect(t, i); }
  absl::StatusOr<ArenaInfo> Arena(NodeId n) const override { return c_.Arena(n); }
  absl::Status Disconnect(NodeId t, const QpEndpoint& r) override { return c_.Disconnect(t, r); }
  absl::Status PeerStatus(NodeId n) const override { return c_.PeerStatus(n); }
  uint64_t Incarnation(NodeId n) const override { return n == 1 ? node1_.load() : 0; }
  void Rejoin1(uint64_t incarnation) { node1_.store(incarnation); }

 private:
  Cluster& c_;
  std::atomic<uint64_t> node1_{7};
};

std::unique_ptr<Cluster> TwoNodes() {
  ClusterOptions o;
  o.named_bytes = 0;
  o.num_nodes = 2;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = FabricKind::kSoft;
  auto c = Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(SessionIncarnation, ASessionNeverReachesAProcessThatRejoinedAfterIt) {
  auto cluster = TwoNodes();
  RejoiningConnector peers(*cluster);
  const RemotePtr on1 = *cluster->node(1).Allocate(8);
  const RemotePtr on0 = *cluster->node(0).Allocate(8);
  auto* word = on1.local<uint64_t>();
  auto s = Session::Create(cluster->node(0), peers);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Write64(on1, 1).ok());

  peers.Rejoin1(8);  // node 1 is another process now
  for (int i = 0; i < 2; ++i) {
    const absl::Status w = (*s)->Write64(on1, 2);
    EXPECT_TRUE(absl::IsUnavailable(w)) << w;
    EXPECT_NE(w.message().find("another process now"), std::string::npos) << w;
    EXPECT_TRUE(absl::IsUnavailable((*s)->Read64(on1).status()));
    uint64_t old = 0;
    EXPECT_TRUE(absl::IsUnavailable(Batch(**s, 1).CompareAndSwap(on1, 1, 3, &old).Execute()));
    EXPECT_TRUE(absl::IsUnavailable((*s)->Reconnect(1))) << "a Reconnect must not move a session to the new process";
  }
  EXPECT_EQ(*word, 1u) << "a session's write landed in a process it never reached";
  EXPECT_TRUE((*s)->Write64(on0, 5).ok()) << "the other nodes stay reachable";

  auto fresh = Session::Create(cluster->node(0), peers);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE((*fresh)->Write64(on1, 9).ok());
  EXPECT_EQ(*word, 9u);
}

}  // namespace
}  // namespace rdma
