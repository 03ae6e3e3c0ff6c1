#ifndef STRUCTURES_HASH_MAP_POLICY_H_
#define STRUCTURES_HASH_MAP_POLICY_H_

namespace structures {

// The hash map's correctness switches. Production code uses HashMapPolicy
// (all true). Tests build deliberately broken variants ("mutants") from the
// same source by flipping one switch (tests/structures/hash_map_mutants.h) and
// check that the linearizability/stress tests catch each one.
struct HashMapPolicy {
  // Readers accept a slot only if its checksum matches (false: trust torn reads).
  static constexpr bool kVerifyReads = true;
  // Readers look in both of a key's windows (false: only the first one).
  static constexpr bool kReadBothWindows = true;
  // Native writers take the unit locks (false: store without them).
  static constexpr bool kNativeWritersLock = true;
  // NIC writers release the lock of the unit they write only after their slot
  // WRITE (false: release first, then write).
  static constexpr bool kReleaseAfterRemoteWrite = true;
  // Readers check the epoch of every state word they look at against their
  // directory (false: they ignore a stale directory).
  static constexpr bool kReadersCheckEpoch = true;
  // A split publishes the new directory only after the moved entries have
  // landed in the new segment and the old one is restamped (false: it formats
  // the new segment, publishes, and only then copies the moved entries).
  static constexpr bool kPublishAfterCopy = true;
  // Called between a split's steps; tests widen the race windows with it.
  static void AfterSplitStep() {}
};

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_POLICY_H_
