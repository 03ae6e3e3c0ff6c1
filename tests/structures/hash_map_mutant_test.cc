// The hash-map mutants (tests/structures/hash_map_mutants.h), each built
// from the shipped source with one check turned off, must be
// caught by the same recorded stress + lincheck as the real map; and the real
// map must pass that exact workload (the control), so the catch is due to the
// mutation. Soft NIC only: its latency injection and copy hook widen the race
// windows; every attempt is bounded, at most kMutantAttempts attempts per mutant
// (map_mutant_util.h).
// Also here (soft only, so not in the verbs guest list): the real map's
// readers falling back to the lock when every optimistic read is torn.

#include <cstdio>

#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/map_models.h"
#include "tests/structures/hash_map_mutants.h"
#include "tests/structures/hash_map_stress.h"
#include "tests/structures/map_mutant_util.h"

namespace structures::testing {
namespace {

using Real = HashMap<StressValue>;
template <typename Policy>
using Mutant = hash_map_internal::BasicHashMap<StressValue, Policy>;

StressResult ExpectControlPasses(const StressConfig& cfg) { return testing::ExpectControlPasses<Real>(cfg, HashMapModel()); }
template <typename Policy>
bool Caught(const StressConfig& cfg, const char* name) {
  return testing::Caught<Mutant<Policy>>(cfg, name, HashMapModel());
}

// Two keys on node 0; native writers there, readers remote and loopback; the
// NIC pauses 50 µs inside every slot it copies from node 0, so READs tear.
StressConfig TornReadConfig(bool byte_copies = false) {
  StressConfig c;
  c.byte_granular_copies = byte_copies;
  c.nodes = 3;
  c.home = 0;
  c.num_keys = 2;
  c.hot_keys = 0;
  const auto think = std::chrono::microseconds(50);
  c.workers = {{0, Path::kAuto, StressWorker::kWriter, think},
               {0, Path::kAuto, StressWorker::kWriter, think},
               {0, Path::kLoopback, StressWorker::kReader},
               {1, Path::kAuto, StressWorker::kReader},
               {2, Path::kAuto, StressWorker::kReader}};
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(50);
  c.ops_per_worker = 300;
  c.duration = std::chrono::milliseconds(1500);
  return c;
}

StressConfig WriterRaceConfig(bool byte_copies = false) { return testing::WriterRaceConfig(StressConfig(), byte_copies); }

TEST(HashMapMutantTest, SkippedChecksumIsCaught) {
  // The window is real: the real map's readers did see torn slots (and retried).
  EXPECT_GT(ExpectControlPasses(TornReadConfig()).torn_reads, 0u);
  EXPECT_TRUE(Caught<MutantSkipChecksumPolicy>(TornReadConfig(), "skip-checksum"));
}

TEST(HashMapMutantTest, NativePutWithoutLockIsCaught) {
  ExpectControlPasses(WriterRaceConfig());
  EXPECT_TRUE(Caught<MutantNativeNoLockPolicy>(WriterRaceConfig(), "native-no-lock"));
}

TEST(HashMapMutantTest, ReleaseBeforeRemoteWriteIsCaught) {
  ExpectControlPasses(WriterRaceConfig());
  EXPECT_TRUE(Caught<MutantEarlyReleasePolicy>(WriterRaceConfig(), "early-release"));
}

// Sixteen keys on node 0, whose part is one unit: each key's windows are the
// unit's two sides, and writers put about half of them in their second
// window. Writers on every path, readers on every path.
StressConfig SecondWindowConfig() {
  StressConfig c;
  c.nodes = 3;
  c.home = 0;
  c.num_keys = 16;
  c.hot_keys = 0;
  c.groups_per_node = 2;  // one unit per node
  c.workers = {{0, Path::kAuto, StressWorker::kMixed},
               {0, Path::kLoopback, StressWorker::kMixed},
               {1, Path::kAuto, StressWorker::kMixed},
               {2, Path::kAuto, StressWorker::kReader}};
  c.ops_per_worker = 400;
  c.duration = std::chrono::milliseconds(1500);
  return c;
}

TEST(HashMapMutantTest, FirstWindowOnlyReaderIsCaught) {
  ExpectControlPasses(SecondWindowConfig());
  EXPECT_TRUE(Caught<MutantFirstWindowOnlyPolicy>(SecondWindowConfig(), "first-window-only"));
}

// Growth: every key on node 0, whose part starts as one segment of one unit
// and splits about three times during the run; native readers and writers
// there (they follow the directory in place), a loopback writer, a remote
// writer and a remote reader (which follow their cached copies).
StressConfig GrowthConfig() {
  StressConfig c;
  c.nodes = 3;
  c.home = 0;
  c.num_keys = 80;
  c.hot_keys = 0;
  c.groups_per_node = 3;
  c.max_groups_per_node = 3 * 64;
  c.put_percent = 40;
  c.insert_percent = 15;
  c.erase_percent = 5;
  const auto think = std::chrono::microseconds(20);
  // The readers are paced so that their reads span the writers' whole run,
  // every split included: the native reader (directory in place) is what
  // sees mutant (f)'s early-published, still empty segment, the remote
  // reader's stale copy is what mutant (e) gets wrong.
  const auto reader_think = std::chrono::microseconds(100);
  c.workers = {{0, Path::kAuto, StressWorker::kMixed, think},
               {0, Path::kAuto, StressWorker::kReader, reader_think},
               {0, Path::kLoopback, StressWorker::kMixed},
               {1, Path::kAuto, StressWorker::kMixed},
               {2, Path::kAuto, StressWorker::kReader, reader_think}};
  c.ops_per_worker = 1500;
  c.duration = std::chrono::milliseconds(2000);
  return c;
}

TEST(HashMapMutantTest, StaleDirectoryReaderIsCaught) {
  EXPECT_GT(ExpectControlPasses(GrowthConfig()).splits, 0u);
  EXPECT_TRUE(Caught<MutantStaleDirectoryReaderPolicy>(GrowthConfig(), "stale-directory-reader"));
}

TEST(HashMapMutantTest, PublishBeforeCopyIsCaught) {
  const StressResult control =
      testing::ExpectControlPasses<Mutant<SlowSplitPolicy>>(GrowthConfig(), HashMapModel());
  EXPECT_GT(control.splits, 0u);
  EXPECT_TRUE(Caught<MutantPublishBeforeCopyPolicy>(GrowthConfig(), "publish-before-copy"));
}

// The same three mutants with every NIC copying byte by byte (Soft-RoCE's
// torn 8-byte words, SoftDeviceOptions::byte_granular_copies): the map's
// defences must still be what catches them (the controls pass in this mode
// too), and the extra tearing must not mask a mutant. In TornReadConfig the
// copy hook now parks each slot READ in the middle of a word.
TEST(HashMapMutantTest, SkippedChecksumIsCaughtWithByteCopies) {
  EXPECT_GT(ExpectControlPasses(TornReadConfig(true)).torn_reads, 0u);
  EXPECT_TRUE(Caught<MutantSkipChecksumPolicy>(TornReadConfig(true), "skip-checksum/bytes"));
}

TEST(HashMapMutantTest, NativePutWithoutLockIsCaughtWithByteCopies) {
  ExpectControlPasses(WriterRaceConfig(true));
  EXPECT_TRUE(Caught<MutantNativeNoLockPolicy>(WriterRaceConfig(true), "native-no-lock/bytes"));
}

TEST(HashMapMutantTest, ReleaseBeforeRemoteWriteIsCaughtWithByteCopies) {
  ExpectControlPasses(WriterRaceConfig(true));
  EXPECT_TRUE(Caught<MutantEarlyReleasePolicy>(WriterRaceConfig(true), "early-release/bytes"));
}

// Soft NIC only: one key on node 0, rewritten by two native writers; every
// READ of node 0 pauses inside each slot until a write completes, so every
// optimistic read is torn: readers must give up after kOptimisticReads and
// read under the group lock, and the history must still be linearizable.
TEST(HashMapSoftStressTest, ReadersFallBackToTheLockUnderConstantTearing) {
  StressConfig c;
  c.backend = "soft";
  c.nodes = 3;
  c.seed = 14;
  c.home = 0;
  c.num_keys = 1;
  c.hot_keys = 0;
  // Every slot copy of a read (two windows: 32 slots) waits for a put, so a
  // read takes 32 writers' rounds, and a reader needs 64 torn reads in a row
  // while the writers still write. On a loaded machine writers write many
  // times slower, so the run ends at the reader's first read under the lock,
  // and otherwise at a deadline far beyond it. The think time makes a
  // writer's ops_per_worker outlast the deadline (100,000 x 200 us = 20 s):
  // the writers write as long as the run lasts, so a starved reader still
  // meets tearing.
  const auto think = std::chrono::microseconds(200);
  c.workers = {{0, Path::kAuto, StressWorker::kWriter, think},
               {0, Path::kAuto, StressWorker::kWriter, think},
               {1, Path::kAuto, StressWorker::kReader}};
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::milliseconds(5);  // at most; under the lock no write comes
  c.slow_copy_until_write = true;
  c.ops_per_worker = 100000;  // writers keep going for the whole run
  c.duration = std::chrono::milliseconds(20000);
  c.end_at_first_locked_read = true;
  StressResult r = RunStress<hash_map_internal::ShippedChecks>(c);
  EXPECT_EQ(r.errors, 0u) << r.first_error;
  std::printf("%zu ops, %llu torn reads, %llu reads under the lock\n", r.history.size(),
              static_cast<unsigned long long>(r.torn_reads), static_cast<unsigned long long>(r.locked_reads));
  EXPECT_GT(r.locked_reads, 0u);
  lincheck::CheckOptions o;
  o.timeout = absl::Seconds(20);
  EXPECT_TRUE(lincheck::IsLinearizable(HashMapModel(), r.history, o));
}

}  // namespace
}  // namespace structures::testing
