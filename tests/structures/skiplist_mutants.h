#ifndef TESTS_STRUCTURES_SKIPLIST_MUTANTS_H_
#define TESTS_STRUCTURES_SKIPLIST_MUTANTS_H_

// Deliberately broken ordered maps (test-only): the production source
// (structures/skiplist/skiplist.h) with one switch of ShippedChecks
// (structures/skiplist/policy.h) turned off, as
// skiplist_internal::BasicSkipList<V, SkipMutant...>.
// tests/structures/skiplist_mutant_test.cc shows the stress catches each.

#include "structures/skiplist/policy.h"

namespace structures::testing {

// (a) Readers accept any copy of a node: a copy torn by a writer returns
// a value (or a fence) nobody wrote.
struct SkipMutantNoValidation : skiplist_internal::ShippedChecks {
  static constexpr bool kValidateReads = false;
};
// (b) Native writers change nodes without the node's lock: updates are lost
// against NIC writers (and each other).
struct SkipMutantNativeNoLock : skiplist_internal::ShippedChecks {
  static constexpr bool kNativeWritersLock = false;
};
// (c) Readers do not move right past a node's high fence: a key that a
// concurrent split moved to the new right node reads as absent.
struct SkipMutantNoMoveRight : skiplist_internal::ShippedChecks {
  static constexpr bool kMoveRight = false;
};
// (d) NIC writers unlock before posting their WRITEs: the next holder works
// on the old node, and the late WRITEs then overwrite its update.
struct SkipMutantUnlockFirst : skiplist_internal::ShippedChecks {
  static constexpr bool kWriteBeforeUnlock = false;
};

// (e) A reclaimer that frees an emptied node without marking it dead: a
// reader that reaches it through a remembered location trusts its old range,
// which its predecessor owns now.
struct SkipMutantReclaimedStillLive : skiplist_internal::ShippedChecks {
  static constexpr bool kMarkReclaimedDead = false;
};

// (f) A split that writes the new right node before the left node: a reused
// right node claims its new range while the left node still does, so a
// reader that reaches it through a stale remembered location sees the
// split's new key, and a later reader through the left node does not
// (tests/structures/skiplist_split_race_test.cc replays it).
struct SkipMutantRightNodeFirst : skiplist_internal::ShippedChecks {
  static constexpr bool kSplitLeftFirst = false;
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_SKIPLIST_MUTANTS_H_
