// The ordered map's mutants (tests/structures/skiplist_mutants.h), each built
// from the production source with one ShippedChecks switch turned off, must be
// caught by the same recorded stress + lincheck as the real map; and the real
// map must pass that exact workload (the control). Soft NIC only: its
// latency injection and copy hook widen the race windows; every attempt is
// bounded, at most kMutantAttempts attempts per mutant (map_mutant_util.h).
//
// The reclaimer mutant frees an emptied node without marking it dead, so
// readers that can still reach it (through a remembered location) trust it.

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "rdma/soft/soft_nic.h"
#include "tests/lincheck/checker.h"
#include "tests/structures/map_models.h"
#include "tests/structures/map_mutant_util.h"
#include "tests/structures/skiplist_mutants.h"
#include "tests/structures/skiplist_stress.h"

namespace structures::testing {
namespace {

using Real = SkipList<StressValue>;
template <typename Checks>
using Mutant = skiplist_internal::BasicSkipList<StressValue, Checks>;

StressConfig Base() {
  StressConfig c;
  c.nodes = 3;
  c.split_keys = {1000, 2000};
  c.home = 0;
  return c;
}

// Two nodes on the soft NIC, a map (of Checks) whose node 0 owns the keys
// below `split`, a native client on node 0 (no Session) and a client on node
// 1, remote for node 0's keys. Members go in the order they must be torn down.
template <typename Checks>
struct Directed {
  std::unique_ptr<rdma::Cluster> cluster;
  std::optional<Mutant<Checks>> map;
  std::unique_ptr<rdma::Session> session;
  std::unique_ptr<typename Mutant<Checks>::Client> native, remote;
};
template <typename Checks>
bool MakeDirected(uint64_t split, bool byte_copies, Directed<Checks>* d) {
  d->cluster = rdma::testing::MakeCluster("soft", 2, 16 << 20, {std::chrono::nanoseconds(0), byte_copies});
  if (d->cluster == nullptr) {
    ADD_FAILURE() << "no cluster";
    return false;
  }
  SkipListOptions o;
  o.split_keys = {split};
  o.part_bytes = 1 << 20;
  auto map = Mutant<Checks>::Create(*d->cluster, o);
  auto s1 = d->cluster->NewSession(1);
  EXPECT_TRUE(map.ok() && s1.ok());
  if (!map.ok() || !s1.ok()) return false;
  d->map.emplace(std::move(*map));
  d->session = std::move(*s1);
  auto native = d->map->NewClient(d->cluster->node(0));
  auto remote = d->map->NewClient(*d->session);
  EXPECT_TRUE(native.ok() && remote.ok()) << native.status() << " " << remote.status();
  if (!native.ok() || !remote.ok()) return false;
  d->native = std::move(*native);
  d->remote = std::move(*remote);
  return true;
}

// A write landing inside a NIC reader's READ, made to happen at a known
// point: node 0's soft NIC calls back in the middle of copying key 7's node
// image (after `at` words, or bytes in byte-copy mode, of each READ), and the
// callback rewrites key 7 natively, for the first 3 READs. A validating
// reader retries and gets a whole value; one that trusts the torn copy
// returns a mix of two values (StressValue's words differ). True when every
// value read was whole.
template <typename Checks>
bool ReaderGetsWholeValues(bool byte_copies) {
  Directed<Checks> d;
  if (!MakeDirected(1000, byte_copies, &d)) return false;
  auto& writer = d.native;  // used only inside the hook
  auto& reader = d.remote;
  EXPECT_TRUE(writer->Put(7, StressValue{{1, 1, 1, 1}}).ok());
  EXPECT_TRUE(reader->Get(7).ok());  // remembers the leaf: the gets below READ only it
  using W = skiplist_internal::Words<StressValue>;
  const uint64_t at = byte_copies ? 8 * (W::Value(0) + 1) + 3 : W::Value(0) + 1;
  int writes_left = 0;
  int64_t next = 2;
  rdma::soft::SoftDevice* dev = rdma::soft::AsSoftDevice(d.cluster->node(0).device());
  dev->faults().SetCopyHook([&](uint64_t index) {
    if (index != at || writes_left == 0) return;
    --writes_left;
    const int64_t v = next++;
    EXPECT_TRUE(writer->Put(7, StressValue{{v, v, v, v}}).ok());
  });
  bool whole = true;
  for (int i = 0; i < 20; ++i) {
    writes_left = 3;
    auto g = reader->Get(7);
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok() || !g->has_value()) {
      whole = false;
      continue;
    }
    const StressValue& x = **g;
    if (x.w[0] != x.w[1] || x.w[1] != x.w[2] || x.w[2] != x.w[3]) whole = false;
  }
  dev->faults().SetCopyHook(nullptr);
  // A validating reader saw the tears (and retried): the test did test.
  if (Checks::kValidateReads) {
    EXPECT_GT(reader->read_stats().torn_reads, 0u) << "no READ was torn";
  }
  return whole;
}

StressConfig WriterRaceConfig(bool byte_copies = false) { return testing::WriterRaceConfig(Base(), byte_copies); }

// A split under a NIC reader's remembered leaf location, made to happen at a
// known point: the reader remembers where key 10's leaf is, native inserts
// then split that leaf so that 10 moves to the new right node, and the reader
// gets 10 again, starting at the remembered (now split) leaf. True when every
// get found its key.
template <typename Checks>
bool ReaderFindsKeysMovedBySplits() {
  Directed<Checks> d;
  if (!MakeDirected(1000, false, &d)) return false;
  auto& native = d.native;
  auto& remote = d.remote;
  const StressValue v{{1, 1, 1, 1}};
  bool all_found = true;
  for (uint64_t round = 0; round < 8; ++round) {
    // Keys 10 + 100 * round + [0, 16): the reader caches the leaf holding
    // the round's key, then 15 more keys below it fill and split that leaf.
    const uint64_t base = 100 * round;
    EXPECT_TRUE(native->Put(base + 50, v).ok());
    auto first = remote->Get(base + 50);
    EXPECT_TRUE(first.ok());
    if (!first.ok() || !first->has_value()) all_found = false;
    for (uint64_t k = base + 1; k < base + 40; k += 2) EXPECT_TRUE(native->Put(k, v).ok());
    auto again = remote->Get(base + 50);
    EXPECT_TRUE(again.ok());
    if (!again.ok() || !again->has_value()) all_found = false;
  }
  EXPECT_GT(native->stats().splits, 0u);
  return all_found;
}

// A reclaimed node under a NIC reader's remembered location, at a known
// point: the reader remembers where keys 500..515 live, native erases empty
// that node (it is reclaimed: its range merges into its predecessor), key 507
// is put again by a fresh client (now into the predecessor), and the reader
// gets 507, starting at the remembered node. True when it found it every time.
template <typename Checks>
bool ReaderFindsKeysAfterReclamation() {
  Directed<Checks> d;
  if (!MakeDirected(100000, false, &d)) return false;
  auto& native = d.native;
  auto& remote = d.remote;
  const StressValue v{{1, 1, 1, 1}};
  // Every step must succeed; a mutant's broken free list may also show up
  // as an error (also a catch: the real map never returns one here).
  bool all_found = true;
  auto ok = [&](const absl::Status& st) {
    if (!st.ok()) {
      std::printf("  %s\n", st.ToString().c_str());
      all_found = false;
    }
    return st.ok();
  };
  for (uint64_t round = 0; round < 4 && all_found; ++round) {
    const uint64_t base = 1000 * (round + 1);
    // base .. base+15 fill one node (after the keys below them split off).
    for (uint64_t k = base - 100; k < base + 16; ++k) ok(native->Put(k, v).status());
    for (uint64_t k = base; k < base + 16; ++k) ok(remote->Get(k).status());  // remembered
    for (uint64_t k = base; k < base + 16; ++k) ok(native->Erase(k).status());
    // A fresh client (no remembered locations) puts the key: it descends to
    // the predecessor, which owns the key now.
    auto fresh = d.map->NewClient(d.cluster->node(0));
    if (!ok(fresh.status())) break;
    ok((*fresh)->Put(base + 7, v).status());
    auto g = remote->Get(base + 7);
    if (ok(g.status()) && !g->has_value()) all_found = false;
  }
  if (Checks::kMarkReclaimedDead) {
    EXPECT_GT(native->stats().reclaimed, 0u);
  }
  return all_found;
}

TEST(SkipListMutantTest, ReclaimedNodeStillClaimingItsKeysIsCaught) {
  EXPECT_TRUE(ReaderFindsKeysAfterReclamation<skiplist_internal::ShippedChecks>());
  EXPECT_FALSE(ReaderFindsKeysAfterReclamation<SkipMutantReclaimedStillLive>());
}

TEST(SkipListMutantTest, ReaderWithoutValidationIsCaught) {
  EXPECT_TRUE(ReaderGetsWholeValues<skiplist_internal::ShippedChecks>(false));
  EXPECT_FALSE(ReaderGetsWholeValues<SkipMutantNoValidation>(false));
}

TEST(SkipListMutantTest, NativeWriterWithoutLockIsCaught) {
  ExpectControlPasses<Real>(WriterRaceConfig(), SkipListModel());
  EXPECT_TRUE(Caught<Mutant<SkipMutantNativeNoLock>>(WriterRaceConfig(), "native-no-lock", SkipListModel()));
}

TEST(SkipListMutantTest, ReaderThatDoesNotMoveRightIsCaught) {
  EXPECT_TRUE(ReaderFindsKeysMovedBySplits<skiplist_internal::ShippedChecks>());
  EXPECT_FALSE(ReaderFindsKeysMovedBySplits<SkipMutantNoMoveRight>());
}

TEST(SkipListMutantTest, NicWriterThatUnlocksFirstIsCaught) {
  ExpectControlPasses<Real>(WriterRaceConfig(), SkipListModel());
  EXPECT_TRUE(Caught<Mutant<SkipMutantUnlockFirst>>(WriterRaceConfig(), "unlock-first", SkipListModel()));
}

// Byte-copy mode (Soft-RoCE's torn words): the defences still hold (the
// controls pass) and the extra tearing does not mask the mutants.
TEST(SkipListMutantTest, ReaderWithoutValidationIsCaughtWithByteCopies) {
  EXPECT_TRUE(ReaderGetsWholeValues<skiplist_internal::ShippedChecks>(true));
  EXPECT_FALSE(ReaderGetsWholeValues<SkipMutantNoValidation>(true));
}

TEST(SkipListMutantTest, NicWriterThatUnlocksFirstIsCaughtWithByteCopies) {
  ExpectControlPasses<Real>(WriterRaceConfig(true), SkipListModel());
  EXPECT_TRUE(Caught<Mutant<SkipMutantUnlockFirst>>(WriterRaceConfig(true), "unlock-first/bytes", SkipListModel()));
}

}  // namespace
}  // namespace structures::testing
