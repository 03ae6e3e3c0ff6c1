// A peer host that dies sends nothing: no CM event, no reply. Run by
// tests/verbs/host_death_test.sh in two guests, one node each (the peer
// list): node 1 powers its guest off (sysrq 'o', no clean-up), node 0 keeps
// READing node 1's arena. Node 0's next operation must fail with Unavailable
// naming node 1 within kBound of its last success (the QP's 6 retries of
// ~1.07 s, docs/design.md §5 "Connecting"); after that every operation on
// node 1 fails at once, node 1's responder QP on node 0 is gone, and node 0's
// own part keeps working.
//
// Both guests meet through the coordinator guest 0 runs (guest_exec.sh). With
// HOST_DEATH_AGREED=1 (the script's second boot) both nodes open an
// rdma::Cluster, which joins the membership: node 1's death is agreed when
// its session expires (coordinator_session 1.5 s), and node 0's next operation
// fails within kAgreedBound instead.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/cm/cm_connector.h"
#include "rdma/session.h"
#include "testing/node_harness.h"
#include "util/status_macros.h"

namespace rdma {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kBound = 12.0;  // seconds: ~7.5 s of retries plus a loaded host's slack
constexpr double kAgreedBound = 2.5;  // seconds: a 1.5 s session expiring, plus the new epoch

[[noreturn]] void PowerOffThisGuest() {
  std::printf("node 1: powering this guest off\n");
  std::fflush(stdout);
  sync();
  const int fd = open("/proc/sysrq-trigger", O_WRONLY);
  if (fd >= 0) (void)!write(fd, "o", 1);
  std::this_thread::sleep_for(std::chrono::seconds(120));
  std::fprintf(stderr, "node 1: still running 120 s after sysrq 'o'\n");
  std::exit(3);
}

absl::Status Survive(Node& node, Connector& peers, Bootstrap& boot) {
  ASSIGN_OR_RETURN(RemotePtr word, node.Allocate(64));
  const uint64_t offset = node.OffsetOf(word);
  ASSIGN_OR_RETURN(auto session, Session::Create(node, peers));
  RETURN_IF_ERROR(boot.Barrier());
  if (node.id() == 1) PowerOffThisGuest();
  ASSIGN_OR_RETURN(ArenaInfo a1, peers.Arena(1));
  const RemotePtr there(1, a1.base + offset);
  const rdma::testing::FirstFailure first =
      rdma::testing::RunUntilItFails([&] { return session->Read64(there).status(); }, std::chrono::seconds(60));
  const absl::Status& failure = first.status;
  const double detect_s = first.seconds_after_last_success;
  std::printf("node 0: %d READs to node 1, then after %.2f s: %s\n", first.successes, detect_s,
              failure.ToString().c_str());
  if (!absl::IsUnavailable(failure) || failure.message().find("node 1") == std::string::npos) {
    return absl::InternalError(absl::StrCat("expected Unavailable naming node 1, got ", failure.ToString()));
  }
  if (detect_s > kBound) return absl::InternalError(absl::StrCat("seen after ", detect_s, " s, bound ", kBound, " s"));
  const auto t0 = Clock::now();
  absl::Status again = session->Read64(there).status();
  const double again_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!absl::IsUnavailable(again) || again_s > 0.5) {
    return absl::InternalError(absl::StrCat("the next operation on node 1 gave ", again.ToString(), " after ",
                                            again_s, " s"));
  }
  if (peers.PeerStatus(1).ok()) return absl::InternalError("the connector still thinks node 1 is alive");
  // Node 1's session can no longer reach this node's arena: its responder QP is gone.
  if (auto* cm = dynamic_cast<cm::CmConnector*>(&peers); cm == nullptr || cm->responder_connections() != 0) {
    return absl::InternalError("node 1's responder QP on node 0 outlived its death");
  }
  RETURN_IF_ERROR(session->FetchAndAdd(word, 1).status());  // node 0's own part keeps working
  return absl::OkStatus();
}

absl::Status SurviveAgreed(Cluster& c) {
  Node& node = c.node(c.self());
  ASSIGN_OR_RETURN(RemotePtr word, node.Allocate(64));
  const uint64_t offset = node.OffsetOf(word);
  ASSIGN_OR_RETURN(auto session, c.ThisThread());
  RETURN_IF_ERROR(c.Barrier());
  if (c.self() == 1) PowerOffThisGuest();
  ASSIGN_OR_RETURN(ArenaInfo a1, c.Arena(1));
  const RemotePtr there(1, a1.base + offset);
  const uint64_t epoch = c.membership()->current().epoch;
  const rdma::testing::FirstFailure first =
      rdma::testing::RunUntilItFails([&] { return session->Read64(there).status(); }, std::chrono::seconds(60));
  const double detect_s = first.seconds_after_last_success;
  std::printf("node 0 (coordinator): %d READs to node 1, then after %.2f s: %s (epoch %llu -> %llu)\n",
              first.successes, detect_s, first.status.ToString().c_str(), static_cast<unsigned long long>(epoch),
              static_cast<unsigned long long>(c.membership()->current().epoch));
  if (!absl::IsUnavailable(first.status) || first.status.message().find("dropped in epoch") == std::string::npos) {
    return absl::InternalError(absl::StrCat("expected Unavailable naming the epoch that dropped node 1, got ",
                                            first.status.ToString()));
  }
  if (detect_s > kAgreedBound) {
    return absl::InternalError(absl::StrCat("agreed after ", detect_s, " s, bound ", kAgreedBound, " s"));
  }
  RETURN_IF_ERROR(session->FetchAndAdd(word, 1).status());  // node 0's own part keeps working
  return absl::OkStatus();
}

TEST(HostDeath, APoweredOffPeerIsAnErrorWithinTheBound) {
  if (!rdma::testing::OneNodePerProcess()) GTEST_SKIP() << "run by tests/verbs/host_death_test.sh (two guests)";
  const char* agreed = std::getenv("HOST_DEATH_AGREED");
  if (agreed != nullptr && std::string(agreed) == "1") {
    ClusterOptions o;
    o.node.arena_bytes = 1 << 20;
    o.named_bytes = 0;
    o.coordinator_session = std::chrono::milliseconds(1500);
    auto c = Cluster::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ((*c)->processes(), 2);
    absl::Status st = SurviveAgreed(**c);
    EXPECT_TRUE(st.ok()) << st;
    return;
  }
  auto pn = rdma::testing::OpenProcessNode(1 << 20);
  ASSERT_TRUE(pn.ok()) << pn.status();
  ASSERT_EQ(pn->boot->size(), 2) << "two nodes: the survivor and the one that powers off";
  absl::Status st = Survive(*pn->node, *pn->peers, *pn->boot);
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace rdma
