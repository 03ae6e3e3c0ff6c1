#ifndef STRUCTURES_SKIPLIST_POLICY_H_
#define STRUCTURES_SKIPLIST_POLICY_H_

// Test-only: the ordered map's correctness switches. SkipList<V> is
// BasicSkipList<V, ShippedChecks> (every switch on). Tests derive a struct
// that turns one switch off, build a deliberately broken map ("mutant") from
// the same source with it, and check that the stress and lincheck tests catch
// it (tests/structures/skiplist_mutants.h). Nothing else names this file.

namespace structures::skiplist_internal {

struct ShippedChecks {
  // Readers accept a node copy only when it validates (native: an even,
  // unchanged version; NIC: the checksum). Off: any copy.
  static constexpr bool kValidateReads = true;
  // Native writers take the node's ALock. Off: they write without it.
  static constexpr bool kNativeWritersLock = true;
  // Readers move right when a key is at or past a node's high fence. Off:
  // such a key reads as absent.
  static constexpr bool kMoveRight = true;
  // NIC writers post their WRITEs before the unlocking CAS (same QP, so they
  // land first). Off: unlock first, then post the WRITEs.
  static constexpr bool kWriteBeforeUnlock = true;
  // A reclaimed node is marked dead before it is freed, and the allocator
  // insists on it. Off: it still claims its old range, so a reader that
  // reaches it through a stale reference answers for its predecessor's keys.
  static constexpr bool kMarkReclaimedDead = true;
  // A split writes the left node before the new right node, both under the
  // right node's lock. Off: the right node first, so a reused right node
  // claims its new range while the left node still does.
  static constexpr bool kSplitLeftFirst = true;
  // Called between a split's two writes; tests widen the window with it.
  static void BetweenSplitWrites() {}
  // Called by a reclaimer between unlinking its node (dead now, its link
  // still in place) and freeing it; tests widen the window with it.
  static void BetweenUnlinkAndFree() {}
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_POLICY_H_
