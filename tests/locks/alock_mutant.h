#ifndef TESTS_LOCKS_ALOCK_MUTANT_H_
#define TESTS_LOCKS_ALOCK_MUTANT_H_

// A deliberately broken ALock (test-only): its native threads skip the local
// cohort and take r_tail, the NIC's word, with CPU CASes. CPU atomics and NIC
// atomics are not atomic with each other, so a native CAS can land between a
// NIC CAS's read and write: two threads both see the word free and both
// enter. tests/locks/alock_mutant_test.cc shows
// the mutual-exclusion stress catches it on the soft NIC.

#include "locks/alock.h"

namespace locks::testing {

struct MutantCpuOnRTailPolicy {
  static constexpr bool kMutantLocalCpuOnRTail = true;
};
using MutantALockClient = lock_internal::BasicALockClient<MutantCpuOnRTailPolicy>;

}  // namespace locks::testing

namespace locks::lock_internal {
extern template class BasicALockClient<testing::MutantCpuOnRTailPolicy>;
}  // namespace locks::lock_internal

#endif  // TESTS_LOCKS_ALOCK_MUTANT_H_
