// A process killed while it holds the catalogue's lock does not stop the
// others from creating names: `mpirun -np 3` in one Soft-RoCE guest
// (tests/verbs/run_guest_tests.sh; elsewhere it skips, and
// catalogue_crash_test covers every crash point on the soft NIC).
//
// Every rank opens a named map (so rank 0, which hosts the catalogue, holds
// its crash repair), then the last rank takes the catalogue's lock and
// SIGKILLs itself. Each survivor waits until its cluster declares the victim
// dead, then opens a new name: both must succeed within a second of their
// declaration, find one structure (each reads the other's key), and still
// see the name opened before. No bootstrap collective can include the dead
// rank, so the survivors meet on a counter in node 0's part, and rank 0,
// whose memory that is, leaves last.

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "structures/common/catalogue.h"
#include "structures/hash_map/hash_map.h"

namespace structures {
namespace {

using Clock = std::chrono::steady_clock;

bool UnderALauncher() {
  return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("RDMADS_NODE_ID") != nullptr;
}

HashMapOptions Small() {
  HashMapOptions o;
  o.groups_per_node = 64;
  return o;
}

// Retries `get` until it gives a value or `limit` passes; `*last` says what
// the last try returned ("none" or its error).
template <typename Get>
std::optional<uint64_t> Eventually(Get get, std::chrono::seconds limit, std::string* last) {
  const auto end = Clock::now() + limit;
  for (;;) {
    auto v = get();
    if (v.ok() && v->has_value()) return **v;
    *last = v.ok() ? "none" : v.status().ToString();
    if (Clock::now() > end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(CatalogueKillTest, ACreatorKilledHoldingTheLockDoesNotStopCreation) {
  if (!UnderALauncher()) GTEST_SKIP() << "one node per process only (mpirun -np 3); see catalogue_crash_test";
  rdma::ClusterOptions o;
  o.node.arena_bytes = size_t{4} << 20;
  o.named_bytes = size_t{8} << 20;
  o.bootstrap.timeout = std::chrono::seconds(180);
  auto cluster = rdma::Cluster::Open(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  rdma::Cluster& c = **cluster;
  if (c.processes() != 3) GTEST_SKIP() << "needs exactly the victim and two survivors (mpirun -np 3)";
  const int me = c.rank(), victim = c.processes() - 1;
  auto thread = c.ThisThread();
  ASSERT_TRUE(thread.ok()) << thread.status();
  auto before = HashMap<uint64_t>::Open(c, "before", Small());
  ASSERT_TRUE(before.ok()) << before.status();
  auto client = before->NewClient(**thread);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Put(100 + me, me).ok());
  // The survivors' meeting counter: every process allocates it at the same
  // point, so it sits at one offset in every arena; node 0's is the one used.
  auto meet = c.node(c.self()).Allocate(64);
  ASSERT_TRUE(meet.ok()) << meet.status();
  const uint64_t meet_offset = meet->address() - c.node(c.self()).arena_info().base;
  ASSERT_TRUE(c.Barrier().ok());

  if (me == victim) {
    auto lock = locks::NewLockClient(locks::LockKind::kRdmaSpin, c.node(c.self()), thread->get());
    ASSERT_TRUE(lock.ok()) << lock.status();
    const rdma::RemotePtr line = rdma::RemotePtr(0, (*thread)->arena(0).base) + Catalogue::kLockOffset;
    ASSERT_TRUE((*lock)->Lock(line).ok());
    std::printf("rank %d: holds the catalogue's lock; SIGKILL to itself\n", me);
    std::fflush(stdout);
    raise(SIGKILL);
  }

  const auto waited_from = Clock::now();
  while (c.PeerStatus(static_cast<rdma::NodeId>(victim)).ok()) {
    ASSERT_LT(Clock::now() - waited_from, std::chrono::seconds(60)) << "rank " << victim << " never declared dead";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto declared = Clock::now();
  auto after = HashMap<uint64_t>::Open(c, "after", Small());
  const double took = std::chrono::duration<double>(Clock::now() - declared).count();
  ASSERT_TRUE(after.ok()) << after.status();
  std::printf("rank %d: opened \"after\" %.3f s after rank %d was declared dead\n", me, took, victim);
  EXPECT_LT(took, 1.0);

  auto fresh = c.ThisThread();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto writer = after->NewClient(**fresh);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Keys homed on the survivors' nodes only: the victim's part is gone.
  const int other = 1 - me;
  uint64_t mine_key = 0, other_key = 0;
  for (uint64_t k = 1; mine_key == 0 || other_key == 0; ++k) {
    const int home = static_cast<int>(after->HomeOf(k));
    if (home == me && mine_key == 0) mine_key = k;
    if (home == other && other_key == 0) other_key = k;
  }
  ASSERT_TRUE((*writer)->Put(mine_key, 1000 + me).ok());
  std::string last;
  EXPECT_EQ(Eventually([&] { return (*writer)->Get(other_key); }, std::chrono::seconds(60), &last),
            std::optional<uint64_t>(1000 + other))
      << "rank " << me << " never read rank " << other << "'s key " << other_key << " (homed on node "
      << after->HomeOf(other_key) << "); its last Get said: " << last
      << " (none: the two Opens made two structures, or the write is lost)";
  auto old = (*writer)->Get(100 + me);
  if (before->HomeOf(100 + me) != static_cast<rdma::NodeId>(victim)) {
    ASSERT_TRUE(old.ok()) << old.status();
    EXPECT_EQ(*old, std::optional<uint64_t>(me));
  }

  // Meet on node 0's counter, then rank 0 leaves last.
  const rdma::RemotePtr counter(0, (*fresh)->arena(0).base + meet_offset);
  ASSERT_TRUE((*fresh)->FetchAndAdd(counter, 1).ok());
  if (me == 0) {
    const auto end = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      auto v = (*fresh)->Read64(counter);
      ASSERT_TRUE(v.ok()) << v.status();
      if (*v == 2) break;
      ASSERT_LT(Clock::now(), end) << "rank 1 never finished";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace
}  // namespace structures
