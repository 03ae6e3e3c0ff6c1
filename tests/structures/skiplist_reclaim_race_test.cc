// Writers of the ordered map against nodes reclaimed, reused or split under
// them, races that stress and lincheck runs reach only by chance, each made
// to happen here, deterministically where a hook allows:
//
//  * Writers and readers starting from remembered locations that have gone
//    stale: a node reclaimed, reused higher up, or split since.
//  * A reclaimer whose emptied node is refilled, or whose predecessor splits
//    or is reclaimed, between its descent and its locks (the copy hook,
//    during its READs; the BetweenUnlinkAndFree hook).
//  * Tower links racing a reclaim and a split.
//  * Corrupt nodes and free lists, which the checks under the locks report
//    as DataLoss.
//
// Soft NIC only; the map, the copy-hook Spy and the part's memory view are
// skiplist_race_env.h's.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdma/path.h"
#include "tests/structures/skiplist_race_env.h"

namespace structures::skiplist_race {
namespace {

// ---------------------------------------------------------------------------
// Stale remembered locations.

class StaleLocationTest : public ::testing::TestWithParam<Path> {};

// Q, which the stale client remembers as the owner of [90, end), is
// reclaimed (dead): a write of 120 through that location must go to P, which
// owns 120 now, and so must a read.
TEST_P(StaleLocationTest, NodeReclaimedSince) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  Client* stale_reader = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer && stale_reader);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  for (Client* c : {stale_writer, stale_reader}) ASSERT_TRUE(c->Get(170, GetParam()).ok());
  for (uint64_t k = 90; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  ASSERT_EQ(w->stats().reclaimed, 1u);
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  ASSERT_NO_FATAL_FAILURE(Put(w, 135));
  auto g = stale_reader->Get(135, GetParam());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "135 read through a reclaimed node";
  EXPECT_EQ(Keys(w), Concat({Range(10, 80, 10), {125, 135}}));
}

// Q, remembered as the owner of [90, end), is reclaimed and reused for
// [200, end): a write of 125 and a read of 135 through it must go to P.
TEST_P(StaleLocationTest, NodeReusedHigherUp) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  Client* stale_reader = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer && stale_reader);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  for (Client* c : {stale_writer, stale_reader}) ASSERT_TRUE(c->Get(170, GetParam()).ok());
  for (uint64_t k = 90; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  // P holds 10..80 and 200..270, full; 280 splits it at 200 into Q.
  for (uint64_t k = 200; k <= 280; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  ASSERT_EQ(w->stats().splits, 2u);
  ASSERT_NO_FATAL_FAILURE(Put(w, 135));
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  auto g = stale_reader->Get(135, GetParam());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "135 read through a node reused for keys above it";
  EXPECT_EQ(Keys(w), Concat({Range(10, 80, 10), {125, 135}, Range(200, 280, 10)}));
}

// P, remembered as the owner of [0, end), splits at 90: a write of 125
// through that location must go on to Q.
TEST_P(StaleLocationTest, NodeSplitSince) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer);
  ASSERT_NO_FATAL_FAILURE(Put(w, 10));
  ASSERT_TRUE(stale_writer->Get(10, GetParam()).ok());
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  auto g = w->Get(125);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "125 written to the node left of the split";
  EXPECT_EQ(Keys(w), Concat({Range(10, 120, 10), {125}, Range(130, 170, 10)}));
}

INSTANTIATE_TEST_SUITE_P(Paths, StaleLocationTest, ::testing::Values(Path::kNative, Path::kLoopback),
                         [](const ::testing::TestParamInfo<Path>& p) {
                           return std::string(p.param == Path::kNative ? "native" : "loopback");
                         });

// ---------------------------------------------------------------------------
// A reclaimer racing writers, between its descent and its locks.

// A NIC client erases 1150, Q's last key, and so reclaims Q. Once Q's height
// is lowered and it is linked at level 0 only, the reclaimer descends to find
// Q's predecessor; right after it READs the head there (holding no lock),
// `meanwhile` runs natively.
void ReclaimWithRace(const std::function<void(Client*)>& meanwhile, Env& e, Client** w_out, Client** r_out) {
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  *w_out = w;
  *r_out = r;
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  for (uint64_t k = 1080; k <= 1140; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  ASSERT_TRUE(r->Get(1150, Path::kLoopback).ok());  // the reclaimer remembers Q
  const uint64_t q = part.Find(1080);
  ASSERT_NE(q, 0u);
  std::atomic<int> fired{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(0)) || index != I::kWords - 1 || fired.load() != 0) return;
    const I qi = part.Peek(q);
    if (!qi.live() || qi.bitmap() != 0 || qi.height() != 1 || !part.LockFree(0) || !part.LockFree(q) ||
        part.LinkedAbove(q)) {
      return;
    }
    fired = 1;
    meanwhile(w);
  });
  auto er = r->Erase(1150, Path::kLoopback);
  spy.Set(nullptr);
  ASSERT_TRUE(er.ok()) << er.status();
  ASSERT_TRUE(er->has_value());
  ASSERT_EQ(fired.load(), 1) << "the reclaimer's descent was not seen";
}

// Q is refilled (1100) before the reclaimer locks it: it must leave Q be.
TEST(SkipListRaceTest, ReclaimerLeavesANodeRefilledMeanwhile) {
  Env e;
  Client *w = nullptr, *r = nullptr;
  ASSERT_NO_FATAL_FAILURE(ReclaimWithRace([](Client* w) { Put(w, 1100, Path::kNative); }, e, &w, &r));
  auto g = w->Get(1100);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "1100 was reclaimed with its node";
  EXPECT_EQ(r->stats().reclaimed, 0u);
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), {1100, 1160}, Range(2000, 2070, 10)}));
}

// P splits at 1071 (1071..1079 go to a new node S, Q's predecessor now)
// before the reclaimer locks P: it must find S and unlink Q after S.
TEST(SkipListRaceTest, ReclaimerFindsAPredecessorSplitMeanwhile) {
  Env e;
  Client *w = nullptr, *r = nullptr;
  ASSERT_NO_FATAL_FAILURE(ReclaimWithRace(
      [](Client* w) {
        for (uint64_t k = 1071; k <= 1079; ++k) Put(w, k, Path::kNative);
      },
      e, &w, &r));
  EXPECT_EQ(w->stats().splits, 3u);
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), Range(1071, 1079, 1), {1160}, Range(2000, 2070, 10)}));
  auto g = w->Get(1075);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "S was cut out of the list";
  EXPECT_EQ(r->stats().reclaimed, 1u) << "Q was left in place";
}

// The reclaimer's predecessor Q is itself emptied and reclaimed between the
// reclaimer's descent (which READ Q live, linking R) and its lock on Q; Q's
// reclaimer is paused between its unlink and its free (the
// BetweenUnlinkAndFree hook), so Q is dead and still links R. The reclaimer
// must not unlink R after dead Q: P links R now.
TEST(SkipListRaceTest, ReclaimerSkipsAPredecessorReclaimedMeanwhile) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  ASSERT_NO_FATAL_FAILURE(Erase(w, 1160));
  for (uint64_t k = 2000; k <= 2060; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));  // R holds 2070 only
  ASSERT_TRUE(r->Get(2070, Path::kLoopback).ok());  // the reclaimer remembers R
  const uint64_t q = part.Find(1080), rr = part.Find(1160);
  ASSERT_TRUE(q != 0 && rr != 0);
  absl::Notification before_free, release;
  g_before_free = &before_free;
  g_free_release = &release;
  std::thread other;
  std::atomic<int> fired{0};
  // The last READ of the reclaimer's level-0 descent is R's (its low is past
  // the key: Q is the predecessor).
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(rr)) || index != I::kWords - 1 || fired.load() != 0) return;
    const I ri = part.Peek(rr);
    if (!ri.live() || ri.bitmap() != 0 || ri.height() != 1 || !part.AllLocksFree() || part.LinkedAbove(rr)) return;
    fired = 1;
    g_free_pause_armed = true;
    other = std::thread([w] {
      for (uint64_t k = 1080; k <= 1150; k += 10) Erase(w, k, Path::kNative);
    });
    EXPECT_TRUE(before_free.WaitForNotificationWithTimeout(absl::Seconds(60))) << "Q's reclaimer did not pause";
  });
  auto er = r->Erase(2070, Path::kLoopback);
  spy.Set(nullptr);
  release.Notify();
  if (other.joinable()) other.join();
  ASSERT_TRUE(er.ok()) << er.status();
  ASSERT_EQ(fired.load(), 1) << "the reclaimer's descent was not seen";
  EXPECT_EQ(w->stats().reclaimed, 1u);
  EXPECT_EQ(r->stats().reclaimed, 1u);
  EXPECT_EQ(part.LinkProblems(), "");
  EXPECT_EQ(Keys(w), Range(1000, 1070, 10));
  ASSERT_NO_FATAL_FAILURE(Put(w, 1100));
  ASSERT_NO_FATAL_FAILURE(Put(w, 2100));
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), {1100, 2100}}));
}

// ---------------------------------------------------------------------------
// Linking a split's tower, racing writers.

// A NIC client inserts ascending keys until one of its splits makes a node
// taller than 1, the first: the head is then its predecessor at level 1 and
// links nothing there. Right after the client's descent to link that level
// READs the head (holding no lock), `meanwhile(victim)` runs natively. The
// part's links must satisfy layout.h invariant 4 afterwards.
void TowerRace(const std::function<void(Client*, const Part&, uint64_t victim)>& meanwhile, Env& e,
               Part* part_out, Client** w_out, uint64_t* victim_out) {
  constexpr uint64_t kBigPool = 256;
  ASSERT_TRUE(MakeEnv(&e, 1, {}, kBigPool));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy, kBigPool);
  *part_out = part;
  Client* w = e.Native();
  Client* n = e.Nic();
  ASSERT_TRUE(w && n);
  *w_out = w;
  std::atomic<uint64_t> victim{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(0)) || index != I::kWords - 1 || victim.load() != 0) return;
    if (part.Peek(0).next[1] != 0 || !part.AllLocksFree()) return;
    for (uint64_t i = 1; i < part.nodes; ++i) {
      const I img = part.Peek(i);
      if (img.live() && img.height() >= 2 && !part.LinkedAbove(i)) {
        victim = i;
        meanwhile(w, part, i);
        return;
      }
    }
  });
  for (uint64_t k = 1; k <= 600 && victim.load() == 0; ++k) {
    auto p = n->Put(k * 1000, Stamp(k * 1000), Path::kLoopback);
    ASSERT_TRUE(p.ok()) << p.status();
  }
  spy.Set(nullptr);
  ASSERT_NE(victim.load(), 0u) << "no split made a node taller than 1";
  *victim_out = victim.load();
}

// The node is emptied (and so reclaimed) meanwhile: its tower must not be
// linked (a dead node in an upper level).
TEST(SkipListRaceTest, TowerLinkSkipsANodeReclaimedMeanwhile) {
  Env e;
  Part part;
  Client* w = nullptr;
  uint64_t victim = 0;
  ASSERT_NO_FATAL_FAILURE(TowerRace(
      [](Client* w, const Part& part, uint64_t v) {
        const I img = part.Peek(v);
        for (size_t i = 0; i < si::kFanout; ++i) {
          if (img.Occupied(i)) Erase(w, img.keys[i], Path::kNative);
        }
      },
      e, &part, &w, &victim));
  EXPECT_GE(w->stats().reclaimed, 1u);
  EXPECT_FALSE(part.Peek(victim).live() && part.Peek(victim).height() >= 2);
  EXPECT_EQ(part.LinkProblems(), "");
}

// A node taller than 1 is split off just below it meanwhile, and linked at
// level 1 after the head: the client must link its node after that one, not
// after the head.
TEST(SkipListRaceTest, TowerLinkFindsAPredecessorLinkedMeanwhile) {
  Env e;
  Part part;
  Client* w = nullptr;
  uint64_t victim = 0;
  std::atomic<bool> made{false};
  ASSERT_NO_FATAL_FAILURE(TowerRace(
      [&made](Client* w, const Part& part, uint64_t v) {
        // Keys just below the node's low split its level-0 predecessor
        // again and again, until a split makes a node taller than 1.
        const uint64_t m = part.Peek(v).low;
        for (uint64_t j = 1; j <= 400 && !made.load(); ++j) {
          Put(w, m - j, Path::kNative);
          for (uint64_t i = 1; i < part.nodes; ++i) {
            const I img = part.Peek(i);
            if (i != v && img.live() && img.height() >= 2 && img.low < m && part.LinkedAbove(i)) made = true;
          }
        }
      },
      e, &part, &w, &victim));
  ASSERT_TRUE(made.load()) << "no split below the node made a node taller than 1";
  EXPECT_EQ(part.LinkProblems(), "");
  EXPECT_TRUE(part.LinkedAbove(victim)) << "the node's tower was not linked";
}

// ---------------------------------------------------------------------------
// Corruption that the checks under the locks report.

// A node whose words do not match its checksum (written without the lock):
// a writer that locks it reports DataLoss rather than publishing over it.
TEST(SkipListRaceTest, WriterReportsANodeFailingItsChecksum) {
  for (Path p : {Path::kNative, Path::kLoopback}) {
    SCOPED_TRACE(rdma::PathName(p));
    Env e;
    ASSERT_TRUE(MakeEnv(&e));
    Spy spy(*e.cluster);
    const Part part = FindPart(e, spy);
    Client* w = p == Path::kNative ? e.Native() : e.Nic();
    ASSERT_NE(w, nullptr);
    ASSERT_NO_FATAL_FAILURE(Put(w, 1, p));
    ASSERT_NO_FATAL_FAILURE(Put(w, 2, p));
    rdma::PlainWord& word = part.At(0).values[0][3];
    const uint64_t good = word.Load();
    word.Store(good ^ 0x100);
    auto r = w->Put(2, Stamp(7), p);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    word.Store(good);
  }
}

// A free list that names a live node, or a next_free just before a live
// node: the split that takes it reports DataLoss rather than overwriting the
// node, and a free list naming a live node is left as it was.
TEST(SkipListRaceTest, SplitReportsALiveNodeFromTheAllocator) {
  for (bool from_free_list : {true, false}) {
    SCOPED_TRACE(from_free_list ? "free list" : "never-used nodes");
    Env e;
    ASSERT_TRUE(MakeEnv(&e));
    Spy spy(*e.cluster);
    const Part part = FindPart(e, spy);
    Client* w = e.Native();
    ASSERT_NE(w, nullptr);
    ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));  // Q is node 1, R node 2
    ASSERT_EQ(part.Find(1080), 1u);
    for (uint64_t k = 2080; k <= 2140; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));  // R full
    if (from_free_list) {
      part.Header().free_head.Store(1);
    } else {
      part.Header().next_free.Store(0);
    }
    auto r = w->Put(2150, Stamp(2150));  // splits R
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    if (from_free_list) {
      EXPECT_EQ(part.Header().free_head.Load(), 1u) << "the free list moved past a live node";
    }
    auto g = w->Get(1080);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(g->has_value()) << "Q was overwritten";
  }
}

}  // namespace
}  // namespace structures::skiplist_race
