#include "locks/alock.h"

#include "locks/alock_impl.h"

namespace locks {

template class BasicALockClient<lock_internal::ALockPolicy>;

}  // namespace locks
