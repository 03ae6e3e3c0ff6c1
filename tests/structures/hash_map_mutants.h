#ifndef TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
#define TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_

// Deliberately broken hash maps (test-only): the production source
// (structures/hash_map/hash_map.h) instantiated with one correctness switch of
// structures::HashMapPolicy flipped. tests/structures/hash_map_mutant_test.cc
// shows the linearizability stress catches each one.

#include <chrono>
#include <thread>

#include "structures/hash_map/policy.h"

namespace structures::testing {

// (a) Readers trust a slot without checking its checksum: a READ torn by a
// concurrent writer returns a value nobody wrote.
struct MutantSkipChecksumPolicy : HashMapPolicy {
  static constexpr bool kVerifyReads = false;
};

// (d) Readers look only in a key's first window: a key that writers put in
// its second window (the emptier one) reads as absent while present.
struct MutantFirstWindowOnlyPolicy : HashMapPolicy {
  static constexpr bool kReadBothWindows = false;
};

// (b) Native writers store without taking the unit locks: they race with NIC
// writers (and each other), losing updates.
struct MutantNativeNoLockPolicy : HashMapPolicy {
  static constexpr bool kNativeWritersLock = false;
};

// (c) NIC writers release the unit lock before their slot WRITE: the next
// holder reads the old slot, and the late WRITE then overwrites its update.
struct MutantEarlyReleasePolicy : HashMapPolicy {
  static constexpr bool kReleaseAfterRemoteWrite = false;
};

// (e) Readers ignore a stale directory (no epoch check): a NIC reader whose
// cached directory predates a split reads the old segment, from which the
// split moved half the keys: present keys read as absent.
struct MutantStaleDirectoryReaderPolicy : HashMapPolicy {
  static constexpr bool kReadersCheckEpoch = false;
};

// Splits that pause between their steps (widens the windows the split's
// order protects); the control for (f).
struct SlowSplitPolicy : HashMapPolicy {
  static void AfterSplitStep() { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }
};

// (f) A split publishes the new directory before the moved entries land in
// the new segment (it formats it empty first): readers that follow the new
// directory miss the moved keys, and writers' updates there are overwritten
// by the late copy.
struct MutantPublishBeforeCopyPolicy : SlowSplitPolicy {
  static constexpr bool kPublishAfterCopy = false;
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
