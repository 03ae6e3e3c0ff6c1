// rdma_cm between processes (rdma/cm/cm_connector.h). Run one node per
// process: `mpirun -np 3` in one Soft-RoCE guest (tests/verbs/run_guest_tests.sh).
// In one process the nodes use the in-process connector and only the harness
// is checked.
//
//  * EverySessionReachesEveryNode: every node's session does a NIC FAA on a
//    counter in every node's arena; each counter ends at the node count.
//    Responder QPs for remote sessions exist while they do and are freed
//    once those sessions close (the CM disconnect).
//  * KilledPeerIsUnavailableWithinASecond (one node per process, >= 3
//    nodes): the last rank SIGKILLs itself while the others READ from its
//    arena in a loop; each survivor's next operation on it fails with
//    Unavailable naming it, less than 1 s after its last success, while
//    operations among the survivors, and a new Session, keep working.

#include "rdma/cm/cm_connector.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/bootstrap.h"
#include "rdma/fabric.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "testing/node_harness.h"
#include "util/status_macros.h"

namespace rdma {
namespace {

using Clock = std::chrono::steady_clock;

// The same offset on every node: allocation is deterministic.
RemotePtr CounterOn(const ArenaInfo& a, uint64_t offset) { return RemotePtr(a.node, a.base + offset); }

absl::Status ReachEveryNode(Node& node, Connector& peers, Bootstrap& boot, std::string& where) {
  where = "allocate";
  ASSIGN_OR_RETURN(RemotePtr mine, node.Allocate(64));
  const uint64_t offset = node.OffsetOf(mine);
  RETURN_IF_ERROR(boot.Barrier());
  auto* cm = dynamic_cast<cm::CmConnector*>(&peers);
  {
    where = "session";
    ASSIGN_OR_RETURN(auto session, Session::Create(node, peers));
    RETURN_IF_ERROR(boot.Barrier());  // every node's sessions are connected
    if (cm != nullptr && cm->responder_connections() != static_cast<size_t>(boot.size() - 1)) {
      return absl::InternalError(absl::StrCat("node ", node.id(), " holds ", cm->responder_connections(),
                                              " responder connections, expected ", boot.size() - 1));
    }
    where = "FAA on every node";
    for (int n = 0; n < peers.num_nodes(); ++n) {
      ASSIGN_OR_RETURN(ArenaInfo a, peers.Arena(static_cast<NodeId>(n)));
      RETURN_IF_ERROR(session->FetchAndAdd(CounterOn(a, offset), 1).status());
    }
    RETURN_IF_ERROR(boot.Barrier());
    where = "read every counter";
    for (int n = 0; n < peers.num_nodes(); ++n) {
      ASSIGN_OR_RETURN(ArenaInfo a, peers.Arena(static_cast<NodeId>(n)));
      ASSIGN_OR_RETURN(uint64_t v, session->Read64(CounterOn(a, offset)));
      if (v != static_cast<uint64_t>(boot.size())) {
        return absl::InternalError(absl::StrCat("node ", n, "'s counter is ", v, ", expected ", boot.size()));
      }
    }
    RETURN_IF_ERROR(boot.Barrier());
  }
  where = "responder QPs freed";
  RETURN_IF_ERROR(boot.Barrier());  // every session closed
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (node.responder_qp_count() != 0 || (cm != nullptr && cm->responder_connections() != 0)) {
    if (Clock::now() > deadline) {
      return absl::InternalError(absl::StrCat("node ", node.id(), " still holds ", node.responder_qp_count(),
                                              " responder QPs 10 s after every session closed"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

TEST(CmConnector, EverySessionReachesEveryNode) { rdma::testing::RunNodes(ReachEveryNode, 3); }

absl::Status SurviveAKill(Node& node, cm::CmConnector& peers, Bootstrap& boot) {
  const int victim = boot.size() - 1;
  ASSIGN_OR_RETURN(RemotePtr mine, node.Allocate(64));
  ASSIGN_OR_RETURN(RemotePtr done, node.Allocate(64));
  const uint64_t offset = node.OffsetOf(mine), done_offset = node.OffsetOf(done);
  ASSIGN_OR_RETURN(auto session, Session::Create(node, peers));
  RETURN_IF_ERROR(boot.Barrier());  // every session is up
  if (boot.rank() == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("node %d: SIGKILL to itself\n", victim);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  ASSIGN_OR_RETURN(ArenaInfo va, peers.Arena(static_cast<NodeId>(victim)));
  const rdma::testing::FirstFailure first = rdma::testing::RunUntilItFails(
      [&] { return session->Read64(CounterOn(va, offset)).status(); }, std::chrono::seconds(30));
  const absl::Status& failed = first.status;
  const double detect_s = first.seconds_after_last_success;
  std::printf("node %d: %d READs to node %d, then after %.3f s: %s\n", node.id(), first.successes, victim, detect_s,
              failed.ToString().c_str());
  if (!absl::IsUnavailable(failed) || failed.message().find(absl::StrCat("node ", victim)) == std::string::npos) {
    return absl::InternalError(absl::StrCat("expected Unavailable naming node ", victim, ", got ", failed.ToString()));
  }
  if (detect_s >= 1.0) return absl::InternalError(absl::StrCat("the death was seen after ", detect_s, " s"));
  if (absl::Status again = session->Read64(CounterOn(va, offset)).status(); !absl::IsUnavailable(again)) {
    return absl::InternalError(absl::StrCat("a later operation on the dead node gave ", again.ToString()));
  }
  // The survivors keep working with each other, on this session and a new one.
  ASSIGN_OR_RETURN(auto fresh, Session::Create(node, peers));
  for (Session* s : {session.get(), fresh.get()}) {
    for (int n = 0; n < victim; ++n) {
      ASSIGN_OR_RETURN(ArenaInfo a, peers.Arena(static_cast<NodeId>(n)));
      RETURN_IF_ERROR(s->FetchAndAdd(CounterOn(a, offset), 1).status());
    }
  }
  if (absl::Status dead = fresh->Read64(CounterOn(va, offset)).status(); !absl::IsUnavailable(dead)) {
    return absl::InternalError(absl::StrCat("a new session's operation on the dead node gave ", dead.ToString()));
  }
  // No bootstrap collective can include the dead rank: the survivors meet on
  // node 0's counters (each added 2 to every survivor's), and node 0, whose
  // words they read, leaves last.
  ASSIGN_OR_RETURN(ArenaInfo a0, peers.Arena(0));
  auto wait_until = [&](RemotePtr word, uint64_t want) -> absl::Status {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      ASSIGN_OR_RETURN(uint64_t v, session->Read64(word));
      if (v == want) return absl::OkStatus();
      if (Clock::now() > deadline) return absl::DeadlineExceededError(absl::StrCat("node 0's word stuck at ", v));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  RETURN_IF_ERROR(wait_until(CounterOn(a0, offset), 2 * static_cast<uint64_t>(victim)));
  RETURN_IF_ERROR(session->FetchAndAdd(CounterOn(a0, done_offset), 1).status());
  if (node.id() == 0) RETURN_IF_ERROR(wait_until(CounterOn(a0, done_offset), static_cast<uint64_t>(victim)));
  return absl::OkStatus();
}

TEST(CmConnector, KilledPeerIsUnavailableWithinASecond) {
  if (!rdma::testing::OneNodePerProcess()) GTEST_SKIP() << "needs one node per process (mpirun -np 3)";
  auto pn = rdma::testing::OpenProcessNode(1 << 20);
  ASSERT_TRUE(pn.ok()) << pn.status();
  if (pn->boot->size() < 3) GTEST_SKIP() << "needs 3 or more nodes (the victim and two survivors)";
  absl::Status st = SurviveAKill(*pn->node, *pn->peers, *pn->boot);
  EXPECT_TRUE(st.ok()) << "node " << pn->boot->rank() << ": " << st;
}

}  // namespace
}  // namespace rdma
