#ifndef TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
#define TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_

// Deliberately broken hash maps (test-only): the shipped source
// (structures/hash_map/hash_map.h) instantiated with one check of
// hash_map_internal::ShippedChecks turned off.
// tests/structures/hash_map_mutant_test.cc shows the linearizability stress
// catches each one.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "structures/hash_map/policy.h"
#include "util/status_macros.h"

namespace structures::testing {

using hash_map_internal::ShippedChecks;

// (a) Readers trust a slot without checking its checksum: a READ torn by a
// concurrent writer returns a value nobody wrote.
struct MutantSkipChecksumPolicy : ShippedChecks {
  static constexpr bool kVerifyReads = false;
};

// (d) Readers look only in a key's first window: a key that writers put in
// its second window (the emptier one) reads as absent while present.
struct MutantFirstWindowOnlyPolicy : ShippedChecks {
  static constexpr bool kReadBothWindows = false;
};

// (b) Native writers store without taking the unit locks: they race with NIC
// writers (and each other), losing updates.
struct MutantNativeNoLockPolicy : ShippedChecks {
  static constexpr bool kNativeWritersLock = false;
};

// (c) NIC writers release the unit lock before their slot WRITE: the next
// holder reads the old slot, and the late WRITE then overwrites its update.
struct MutantEarlyReleasePolicy : ShippedChecks {
  static constexpr bool kReleaseAfterRemoteWrite = false;
};

// (e) Readers ignore a stale directory (no epoch check): a NIC reader whose
// cached directory predates a split reads the old segment, from which the
// split moved half the keys: present keys read as absent.
struct MutantStaleDirectoryReaderPolicy : ShippedChecks {
  static constexpr bool kReadersCheckEpoch = false;
};

inline void PauseBetweenSplitSteps() { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }

// Splits that pause between their steps, in the shipped order: the control
// for (f), with the same wide windows.
struct SlowSplitPolicy : ShippedChecks {
  template <typename Slot, typename Units, typename Publish>
  static absl::Status SplitWrites(Units& units, size_t x, size_t y, uint64_t* xs, uint64_t* ys, size_t n_slots,
                                  int new_epoch, Publish&& publish) {
    RETURN_IF_ERROR(units.WriteSegmentSlots(y, ys));
    PauseBetweenSplitSteps();
    RETURN_IF_ERROR(units.WriteSegmentSlots(x, xs));
    PauseBetweenSplitSteps();
    return publish();
  }
};

// (f) A split publishes the new directory before the moved entries land in
// the new segment (it formats it empty first): readers that follow the new
// directory miss the moved keys, and writers' updates there are overwritten
// by the late copy.
struct MutantPublishBeforeCopyPolicy : ShippedChecks {
  template <typename Slot, typename Units, typename Publish>
  static absl::Status SplitWrites(Units& units, size_t x, size_t y, uint64_t* xs, uint64_t* ys, size_t n_slots,
                                  int new_epoch, Publish&& publish) {
    // Y formatted: every slot empty at the new epoch.
    std::vector<uint64_t> empty(n_slots * Slot::kWords, 0);
    for (size_t i = 0; i < n_slots; ++i) {
      uint64_t* t = empty.data() + i * Slot::kWords;
      t[Slot::kStateWord] = Slot::Restamped(0, new_epoch, false);
      t[Slot::kChecksumWord] = Slot::Checksum(t);
    }
    RETURN_IF_ERROR(units.WriteSegmentSlots(y, empty.data()));
    RETURN_IF_ERROR(publish());
    PauseBetweenSplitSteps();
    for (size_t i = 0; i < n_slots; ++i) {  // versions must move past the format's
      uint64_t* t = ys + i * Slot::kWords;
      t[Slot::kStateWord] =
          Slot::Restamped(Slot::Restamped(0, new_epoch, false), new_epoch, Slot::Occupied(t[Slot::kStateWord]));
      t[Slot::kChecksumWord] = Slot::Checksum(t);
    }
    RETURN_IF_ERROR(units.WriteSegmentSlots(y, ys));
    PauseBetweenSplitSteps();
    return units.WriteSegmentSlots(x, xs);
  }
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_HASH_MAP_MUTANTS_H_
