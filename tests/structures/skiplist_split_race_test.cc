// A split that reuses a freed node, paused between its two writes (the
// BetweenSplitWrites hook of structures/skiplist/policy.h), with two readers
// of the split's new key: one that still remembers the reused node's location
// from its earlier life, and a fresh one that descends from the head and
// arrives after the first has answered. The real map keeps both readers
// waiting for the right node's lock until the split is done (both see the
// key); the mutant that writes the right node first lets the first reader see
// the key through its stale location while the left node still owns the range,
// and the second, later reader then misses it: not linearizable.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdma/path.h"
#include "structures/skiplist/skiplist.h"
#include "testing/backends.h"
#include "tests/structures/skiplist_mutants.h"

namespace structures {
namespace {

// The pause: armed for one split; the splitter announces that it is between
// its writes and waits for the release.
std::atomic<bool> g_armed{false};
absl::Notification* g_in_window = nullptr;
absl::Notification* g_release = nullptr;

template <typename Base>
struct Pausing : Base {
  static void BetweenSplitWrites() {
    if (!g_armed.exchange(false)) return;
    g_in_window->Notify();
    g_release->WaitForNotification();
  }
};

struct Outcome {
  absl::StatusOr<std::optional<uint64_t>> stale{std::nullopt}, fresh{std::nullopt};
  bool stale_before_release = false, fresh_before_release = false;
  uint64_t split_waits = 0;
};

constexpr absl::Duration kGrace = absl::Milliseconds(300);

// Node 0 of a one-node cluster; the splitter writes natively, the readers use
// `reader_path` (native, or loopback through their own sessions).
// `grace`: how long each reader is given to answer while the split is
// paused (the real map's readers must not answer then, so a short grace is
// enough to see that; the mutant's do answer, and on a loaded machine may
// need long to).
template <typename Base>
void RunPausedSplit(Path reader_path, absl::Duration grace, Outcome* out) {
  using Map = skiplist_internal::BasicSkipList<uint64_t, Pausing<Base>>;
  absl::Notification in_window, release;
  g_in_window = &in_window;
  g_release = &release;
  rdma::testing::ClusterWithSession e = rdma::testing::MakeClusterWithSession("soft", 1, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.part_bytes = skiplist_internal::kNodesOffset + 64 * Map::kNodeBytes;
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto s1 = e.cluster->NewSession(0);
  auto s2 = e.cluster->NewSession(0);
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto writer = map->NewClient(*e.session);
  auto stale = map->NewClient(**s1);
  auto fresh = map->NewClient(**s2);
  ASSERT_TRUE(writer.ok() && stale.ok() && fresh.ok());
  auto put = [&](uint64_t k) { ASSERT_TRUE((*writer)->Put(k, k, Path::kNative).ok()) << k; };
  // 17 keys into the 16-entry head: it splits at 9, node N owns [9, end).
  for (uint64_t k = 1; k <= 17; ++k) put(k);
  ASSERT_EQ((*writer)->stats().splits, 1u);
  // The stale reader remembers N as the owner of [9, end).
  auto g = (*stale)->Get(12, reader_path);
  ASSERT_TRUE(g.ok() && *g == std::optional<uint64_t>(12)) << g.status();
  // N emptied: the head takes its range back and N goes on the free list.
  for (uint64_t k = 9; k <= 17; ++k) ASSERT_TRUE((*writer)->Erase(k, Path::kNative).ok()) << k;
  ASSERT_EQ((*writer)->stats().reclaimed, 1u);
  // The head full again (1..8, 18..25); putting 26 splits it at 18 and reuses
  // N for [18, end), with 26 in it. Paused between the split's two writes.
  for (uint64_t k = 18; k <= 25; ++k) put(k);
  g_armed = true;
  std::thread splitter([&] { put(26); });
  ASSERT_TRUE(in_window.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // The stale reader first; the fresh one starts once it has answered (or
  // after a grace period, while it still waits).
  absl::Notification stale_done, fresh_done;
  std::thread t1([&] {
    out->stale = (*stale)->Get(26, reader_path);
    out->stale_before_release = !release.HasBeenNotified();
    stale_done.Notify();
  });
  stale_done.WaitForNotificationWithTimeout(grace);
  std::thread t2([&] {
    out->fresh = (*fresh)->Get(26, reader_path);
    out->fresh_before_release = !release.HasBeenNotified();
    fresh_done.Notify();
  });
  fresh_done.WaitForNotificationWithTimeout(grace);
  release.Notify();
  t1.join();
  t2.join();
  splitter.join();
  out->split_waits = (*stale)->stats().split_waits + (*fresh)->stats().split_waits;
  // After the split, every reader sees 26 (and the map is consistent).
  auto after = (*fresh)->Get(26, reader_path);
  ASSERT_TRUE(after.ok() && *after == std::optional<uint64_t>(26)) << after.status();
  auto scan = (*writer)->Scan(0, 100);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->size(), 17u);  // 1..8, 18..26
}

class SkipListSplitRaceTest : public ::testing::TestWithParam<Path> {};

TEST_P(SkipListSplitRaceTest, ReadersOfAReusedNodeWaitForTheSplit) {
  Outcome out;
  RunPausedSplit<skiplist_internal::ShippedChecks>(GetParam(), kGrace, &out);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(out.stale.ok()) << out.stale.status();
  ASSERT_TRUE(out.fresh.ok()) << out.fresh.status();
  // Neither reader may answer while the split is between its writes: 26 is
  // not in the map yet, and answering "absent" then is fine only if no
  // reader saw 26 earlier. Here both wait and then see it.
  EXPECT_EQ(*out.stale, std::optional<uint64_t>(26));
  EXPECT_EQ(*out.fresh, std::optional<uint64_t>(26));
  EXPECT_FALSE(out.stale_before_release);
  EXPECT_FALSE(out.fresh_before_release);
  EXPECT_GE(out.split_waits, 2u);  // each waited for the right node's lock
}

// The mutant: the stale reader sees 26 during the pause, and the fresh one,
// which starts after that answer, misses it (the left node still owns 26's
// range and does not hold it).
TEST_P(SkipListSplitRaceTest, MutantRightNodeFirstIsCaught) {
  Outcome out;
  RunPausedSplit<testing::SkipMutantRightNodeFirst>(GetParam(), absl::Seconds(30), &out);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(out.stale.ok()) << out.stale.status();
  ASSERT_TRUE(out.fresh.ok()) << out.fresh.status();
  const bool violation = out.stale_before_release && out.fresh_before_release &&
                         *out.stale == std::optional<uint64_t>(26) && !out.fresh->has_value();
  EXPECT_TRUE(violation) << "stale " << out.stale->value_or(0) << " (before release " << out.stale_before_release
                         << "), fresh " << out.fresh->value_or(0) << " (before release "
                         << out.fresh_before_release << ")";
}

INSTANTIATE_TEST_SUITE_P(Paths, SkipListSplitRaceTest, ::testing::Values(Path::kNative, Path::kLoopback),
                         [](const ::testing::TestParamInfo<Path>& p) {
                           return std::string(p.param == Path::kNative ? "native" : "loopback");
                         });

}  // namespace
}  // namespace structures
