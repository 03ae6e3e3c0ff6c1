#ifndef TESTING_TWO_NODE_HARNESS_H_
#define TESTING_TWO_NODE_HARNESS_H_

// Runs a two-node test body, each node with its own rdma::Node and
// TcpConnector, in one of two modes:
//  * two processes (two Soft-RoCE guests): `rxe_run --two-guests` sets
//    RXE_NUM_NODES=2, RXE_NODE_ID=0|1, RXE_SELF_IP, RXE_PEER_IP; this process
//    runs its own node only, on the verbs fabric, listening on
//    RDMADS_TCP_PORT (default `default_port`), and prints how long it took;
//  * otherwise one process: both nodes on the first backend of RDMADS_FABRICS
//    (default soft), connectors on 127.0.0.1, node 1 on a second thread.
//
//   absl::Status RunNode(rdma::Node& node, rdma::verbs::TcpConnector& connector) {
//     RETURN_IF_ERROR(connector.Barrier(1, std::chrono::seconds(60)));  // both up
//     ...  // this node's part of the test (node.id() is 0 or 1)
//   }
//   TEST(MyTwoNode, Works) { rdma::testing::RunTwoNodes(RunNode, 7500); }
//
// Contract: `run_node` runs once per node, concurrently in the one-process
// mode, so it must be safe to call from two threads. Setup failures and a
// non-OK status from `run_node` are gtest failures; call it as the last
// statement of a TEST.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "rdma/node.h"
#include "rdma/verbs/tcp_connector.h"

namespace rdma::testing {

using TwoNodeBody = std::function<absl::Status(Node& node, verbs::TcpConnector& connector)>;

// Each node gets a 4 MiB arena.
void RunTwoNodes(const TwoNodeBody& run_node, uint16_t default_port);

// A body that keeps `where` set to the phase it is in ("node 1 insert
// race"): RunTwoNodes with a failing body's message prefixed by that phase.
using PhasedTwoNodeBody = std::function<absl::Status(Node& node, verbs::TcpConnector& connector, std::string& where)>;
void RunTwoNodesPhased(const PhasedTwoNodeBody& run_node, uint16_t default_port);

}  // namespace rdma::testing

#endif  // TESTING_TWO_NODE_HARNESS_H_
