#ifndef STRUCTURES_QUEUE_POLICY_H_
#define STRUCTURES_QUEUE_POLICY_H_

// The queue's concurrency checks as compile-time switches: a test-only seam,
// not part of the public type. `Queue<V>` is `BasicQueue<V, ShippedChecks>`,
// where every switch is on and the seam compiles away. Tests derive mutants
// from ShippedChecks, each turning one check off
// (tests/structures/queue_mutant_test.cc).

namespace structures::queue_internal {

struct ShippedChecks {
  // Consumers check a slot's seq word before they read its payload.
  static constexpr bool kSeqBeforePayload = true;
  // NIC producers publish (seq, tail) in WRITEs after the payload WRITE.
  static constexpr bool kPublishAfterPayload = true;
  // Consumers treat a slot still free for the head position as empty.
  static constexpr bool kCheckEmpty = true;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_POLICY_H_
