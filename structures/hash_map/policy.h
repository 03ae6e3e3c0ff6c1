#ifndef STRUCTURES_HASH_MAP_POLICY_H_
#define STRUCTURES_HASH_MAP_POLICY_H_

// The hash map's concurrency checks as compile-time switches: a test-only
// seam, not part of the public type. `HashMap<V>` is
// `BasicHashMap<V, ShippedChecks>`, where every switch is on and the seam
// compiles away. Tests derive mutants from ShippedChecks, each turning one
// check off (tests/structures/hash_map_mutants.h), and show that the stress
// and linearizability tests catch every one.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "util/status_macros.h"

namespace structures::hash_map_internal {

struct ShippedChecks {
  // Readers accept a slot only if its checksum matches.
  static constexpr bool kVerifyReads = true;
  // Readers look in both of a key's windows.
  static constexpr bool kReadBothWindows = true;
  // Native writers take the unit locks.
  static constexpr bool kNativeWritersLock = true;
  // NIC writers release a unit's lock only after their slot WRITE.
  static constexpr bool kReleaseAfterRemoteWrite = true;
  // Readers compare the epoch of every state word with their directory's.
  static constexpr bool kReadersCheckEpoch = true;

  // A split's writes, under the directory lock and every unit lock of the
  // old segment X: the new segment Y complete (`ys`), then X restamped
  // (`xs`), then the directory published. docs/design.md §9.2 says why this
  // order; a mutant changes it.
  template <typename Slot, typename Units, typename Publish>
  static absl::Status SplitWrites(Units& units, size_t x, size_t y, uint64_t* xs, uint64_t* ys, size_t n_slots,
                                  int new_epoch, Publish&& publish) {
    RETURN_IF_ERROR(units.WriteSegmentSlots(y, ys));
    RETURN_IF_ERROR(units.WriteSegmentSlots(x, xs));
    return publish();
  }
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_POLICY_H_
