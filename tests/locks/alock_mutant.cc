#include "tests/locks/alock_mutant.h"

#include "locks/alock_impl.h"

namespace locks::lock_internal {
template class BasicALockClient<testing::MutantCpuOnRTailPolicy>;
}  // namespace locks::lock_internal
