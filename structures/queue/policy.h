#ifndef STRUCTURES_QUEUE_POLICY_H_
#define STRUCTURES_QUEUE_POLICY_H_

namespace structures {

// The queue's correctness switches. Production code uses QueuePolicy (all
// true). Tests build deliberately broken variants ("mutants") from the same
// source by flipping one switch and check that the tests catch each one.
struct QueuePolicy {
  // Consumers check the slot's seq word before they read its payload (false:
  // payload first, so a value can be read before it is complete).
  static constexpr bool kSeqBeforePayload = true;
  // Native producers take the tail lock through ALock's native cohort (false:
  // they "lock" with a CPU CAS on the lock's NIC-domain r_tail word, which is
  // not atomic with the NIC producers' RDMA CAS).
  static constexpr bool kNativeUsesItsDomain = true;
  // NIC producers publish (seq, tail) in WRITEs after the payload WRITE
  // (false: publish first, then write the payload).
  static constexpr bool kPublishAfterPayload = true;
  // Consumers treat a slot that is still free for the head position as
  // "empty" (false: they take it anyway when they see contention).
  static constexpr bool kCheckEmpty = true;
};

}  // namespace structures

#endif  // STRUCTURES_QUEUE_POLICY_H_
