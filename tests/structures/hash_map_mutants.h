#ifndef TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
#define TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_

// Deliberately broken hash maps (test-only): the production source
// (structures/hash_map/hash_map.h) instantiated with one correctness switch of
// structures::HashMapPolicy flipped. tests/structures/hash_map_mutant_test.cc
// shows the linearizability stress catches each one.

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

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
