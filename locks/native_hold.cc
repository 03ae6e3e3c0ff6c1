#include "locks/native_hold.h"

#include "locks/alock_impl.h"

namespace locks {

absl::StatusOr<bool> NativeHold::TryTake() {
  uint64_t expected = 0;
  if (!line_.l_tail.CompareExchange(expected, kHeldWord, std::memory_order_seq_cst)) return false;
  bool fast = false;
  absl::Status s = alock_internal::PetersonAsNative(line_, lock_, options_, &fast, [] {}, [] {});
  if (!s.ok()) {
    Give();
    return s;
  }
  return true;
}

void NativeHold::Give() { line_.l_tail.Store(0, std::memory_order_release); }

}  // namespace locks
