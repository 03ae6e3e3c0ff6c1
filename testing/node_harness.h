#ifndef TESTING_NODE_HARNESS_H_
#define TESTING_NODE_HARNESS_H_

// Runs a multi-node test body, each node with its own rdma::Node, Connector
// and Bootstrap, in one of two modes:
//  * one node per process, when a launcher or a coordinator is in the
//    environment (PMIX_NAMESPACE: mpirun, srun; RDMADS_COORDINATOR: the
//    coordinator's rendezvous, see rdma/bootstrap.h): this process runs
//    node rank() only, on the verbs fabric, connected by rdma_cm
//    (rdma::cm::CmConnector); it prints how long its body took;
//  * otherwise one process: `in_process_nodes` nodes on the first backend of
//    RDMADS_FABRICS (default soft), each on its own thread, with an
//    in-process connector and bootstrap.
//
//   absl::Status RunNode(rdma::Node& node, rdma::Connector& peers,
//                        rdma::Bootstrap& boot, std::string& where) {
//     where = "setup";
//     RETURN_IF_ERROR(boot.Barrier());  // every node is up
//     ...                               // this node's part (node.id() = boot.rank())
//   }
//   TEST(MyMultiNode, Works) { rdma::testing::RunNodes(RunNode); }
//
// Contract: the body runs once per node, concurrently in the one-process
// mode. A failing body's status is a gtest failure prefixed by `where` (the
// phase it was in). After a body that succeeded the harness waits at one more
// barrier, so no node tears down while another still works; in one process a
// failed body ends the other nodes' collectives with Aborted (every wait is
// bounded by 180 s). Setup failures are gtest failures too. Call it as the
// last statement of a TEST.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/bootstrap.h"
#include "rdma/cm/cm_connector.h"
#include "rdma/fabric.h"
#include "rdma/node.h"

namespace rdma::testing {

using NodeBody = std::function<absl::Status(Node& node, Connector& peers, Bootstrap& boot, std::string& where)>;

// Each node gets a 4 MiB arena.
void RunNodes(const NodeBody& body, int in_process_nodes = 2);

// True when the environment asks for one node per process.
bool OneNodePerProcess();

// This process's node of a job the environment describes: the bootstrap
// (180 s timeout: another guest may still be booting), the verbs fabric,
// Node(rank) and its CmConnector. Members are destroyed in the right order.
struct ProcessNode {
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<Node> node;
  std::unique_ptr<cm::CmConnector> peers;
};
absl::StatusOr<ProcessNode> OpenProcessNode(size_t arena_bytes = size_t{4} << 20);

// How an operation on a peer that is killed or powered off first failed.
struct FirstFailure {
  absl::Status status;                // DeadlineExceeded if it never failed within the limit
  double seconds_after_last_success;  // bounds how late the death was seen
  int successes = 0;
};
// Calls `op` (returning absl::Status) back to back until it fails or `limit`
// has passed since the first call.
template <typename Op>
FirstFailure RunUntilItFails(Op op, std::chrono::seconds limit) {
  using Clock = std::chrono::steady_clock;
  FirstFailure f;
  Clock::time_point last_ok = Clock::now();
  const Clock::time_point give_up = last_ok + limit;
  f.status = absl::DeadlineExceededError(
      absl::StrCat("still succeeding ", limit.count(), " s after the first call"));
  while (Clock::now() < give_up) {
    if (absl::Status s = op(); !s.ok()) {
      f.status = s;
      break;
    }
    last_ok = Clock::now();
    ++f.successes;
  }
  f.seconds_after_last_success = std::chrono::duration<double>(Clock::now() - last_ok).count();
  return f;
}

}  // namespace rdma::testing

#endif  // TESTING_NODE_HARNESS_H_
