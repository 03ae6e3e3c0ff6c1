#include "locks/alock.h"

#include "locks/alock_impl.h"

namespace locks::lock_internal {

template class BasicALockClient<ALockPolicy>;

}  // namespace locks::lock_internal
