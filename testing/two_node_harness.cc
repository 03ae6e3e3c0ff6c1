#include "testing/two_node_harness.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rdma/fabric.h"
#include "util/status_macros.h"

namespace rdma::testing {
namespace {

using verbs::TcpConnector;
using verbs::TcpConnectorOptions;
using verbs::TcpPeer;

std::string Env(const char* name, const std::string& dflt = "") {
  const char* v = std::getenv(name);
  return v == nullptr ? dflt : std::string(v);
}

NodeOptions SmallNode() {
  NodeOptions o;
  o.arena_bytes = 4 << 20;
  return o;
}

// One node of two, in separate guests, on the verbs fabric.
void RunOneOfTwoProcesses(const TwoNodeBody& run_node, uint16_t default_port) {
  const int id = std::atoi(Env("RXE_NODE_ID", "-1").c_str());
  ASSERT_TRUE(id == 0 || id == 1) << "RXE_NODE_ID must be 0 or 1";
  const std::string self_ip = Env("RXE_SELF_IP"), peer_ip = Env("RXE_PEER_IP");
  ASSERT_FALSE(self_ip.empty() || peer_ip.empty()) << "RXE_SELF_IP and RXE_PEER_IP must be set";
  const uint16_t port =
      static_cast<uint16_t>(std::atoi(Env("RDMADS_TCP_PORT", absl::StrCat(default_port)).c_str()));
  FabricOptions fo;
  fo.kind = FabricKind::kVerbs;
  auto fabric = OpenFabric(fo);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  auto dev = (*fabric)->OpenDevice(static_cast<NodeId>(id));
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto node = Node::Create(static_cast<NodeId>(id), std::move(*dev), SmallNode());
  ASSERT_TRUE(node.ok()) << node.status();
  TcpConnectorOptions co;
  co.peers.resize(2);
  co.peers[id] = TcpPeer{self_ip, port};
  co.peers[1 - id] = TcpPeer{peer_ip, port};
  co.connect_timeout = std::chrono::seconds(120);  // the other guest may still be booting
  auto conn = TcpConnector::Create(**node, co);
  ASSERT_TRUE(conn.ok()) << conn.status();
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = run_node(**node, **conn);
  EXPECT_TRUE(st.ok()) << st;
  std::printf("node %d finished in %.2f s\n", id,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Both nodes in this process, each with its own device and connector.
void RunBothInProcess(const TwoNodeBody& run_node) {
  std::vector<std::string> backends = absl::StrSplit(Env("RDMADS_FABRICS", "soft"), ',', absl::SkipEmpty());
  auto kind = ParseFabricKind(backends.empty() ? "soft" : backends[0]);
  ASSERT_TRUE(kind.ok()) << kind.status();
  FabricOptions fo;
  fo.kind = *kind;
  auto fabric = OpenFabric(fo);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  std::unique_ptr<Node> nodes[2];
  std::unique_ptr<TcpConnector> conns[2];
  for (int id = 0; id < 2; ++id) {
    auto dev = (*fabric)->OpenDevice(static_cast<NodeId>(id));
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto node = Node::Create(static_cast<NodeId>(id), std::move(*dev), SmallNode());
    ASSERT_TRUE(node.ok()) << node.status();
    nodes[id] = std::move(*node);
    TcpConnectorOptions co;
    co.peers = {TcpPeer{"127.0.0.1", 0}, TcpPeer{"127.0.0.1", 0}};
    co.connect_timeout = std::chrono::seconds(10);
    auto conn = TcpConnector::Create(*nodes[id], co);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conns[id] = std::move(*conn);
  }
  conns[0]->SetPeer(1, TcpPeer{"127.0.0.1", conns[1]->listen_port()});
  conns[1]->SetPeer(0, TcpPeer{"127.0.0.1", conns[0]->listen_port()});
  absl::Status results[2];
  std::thread t1([&] { results[1] = run_node(*nodes[1], *conns[1]); });
  results[0] = run_node(*nodes[0], *conns[0]);
  t1.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  conns[0].reset();
  conns[1].reset();
}

}  // namespace

void RunTwoNodes(const TwoNodeBody& run_node, uint16_t default_port) {
  if (Env("RXE_NUM_NODES") == "2") {
    RunOneOfTwoProcesses(run_node, default_port);
  } else {
    RunBothInProcess(run_node);
  }
}

void RunTwoNodesPhased(const PhasedTwoNodeBody& run_node, uint16_t default_port) {
  RunTwoNodes(
      [&run_node](Node& node, verbs::TcpConnector& connector) {
        std::string where;
        return util::Annotate(run_node(node, connector, where), where);
      },
      default_port);
}

}  // namespace rdma::testing
