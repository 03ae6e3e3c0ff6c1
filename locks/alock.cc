#include "locks/alock.h"

#include "locks/alock_impl.h"

namespace locks {

template class BasicALockClient<internal::ALockPolicy>;

}  // namespace locks
