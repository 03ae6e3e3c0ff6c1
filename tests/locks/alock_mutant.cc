#include "tests/locks/alock_mutant.h"

#include "locks/alock_impl.h"

namespace locks {
template class BasicALockClient<testing::MutantCpuOnRTailPolicy>;
}
