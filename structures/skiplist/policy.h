#ifndef STRUCTURES_SKIPLIST_POLICY_H_
#define STRUCTURES_SKIPLIST_POLICY_H_

namespace structures {

// The ordered map's correctness switches. Production code uses SkipListPolicy
// (all true). Tests build deliberately broken variants ("mutants") from the
// same source by flipping one switch and check that the tests catch each.
struct SkipListPolicy {
  // Readers accept a node copy only when it validates (native: an even,
  // unchanged version; NIC: the checksum). false: any copy.
  static constexpr bool kValidateReads = true;
  // Native writers take the node's ALock. false: they write without it.
  static constexpr bool kNativeWritersLock = true;
  // Readers move right when a key is at or past a node's high fence (the node
  // split since the link that led there was read). false: "absent".
  static constexpr bool kMoveRight = true;
  // NIC writers post their WRITEs before the unlocking CAS (same QP, so they
  // land first). false: unlock first, then post the WRITEs.
  static constexpr bool kWriteBeforeUnlock = true;
  // A reclaimed (emptied, unlinked) node is marked dead before it is freed.
  // false: it still claims its old range, so a reader that reaches it
  // through a stale link or cached location answers for keys its
  // predecessor now owns.
  static constexpr bool kMarkReclaimedDead = true;
  // A split writes the left node (its high lowered to the median, the link)
  // before the new right node, both under the right node's lock. false: the
  // right node first, so a reused right node already claims its new range
  // while the left node still does, and a reader that reaches it through a
  // stale reference sees the split's new key before the left node gives it
  // up.
  static constexpr bool kSplitLeftFirst = true;
  // Called between a split's two writes; tests widen the window with it.
  static void BetweenSplitWrites() {}
};

}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_POLICY_H_
