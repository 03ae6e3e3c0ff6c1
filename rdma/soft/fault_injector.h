#ifndef RDMA_SOFT_FAULT_INJECTOR_H_
#define RDMA_SOFT_FAULT_INJECTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include <condition_variable>
#include <mutex>

namespace rdma::soft {

// Deterministic fault hooks of one soft NIC. Thread-safe. Hooks that concern
// "operations" count WRs this NIC initiates; hooks that concern "atomics" and
// "copies" apply to operations this NIC executes as the target (responder),
// since that is where the memory is touched.
class FaultInjector {
 public:
  // The n-th operation initiated from now on (1-based) completes with
  // kRemoteOperationError and moves its QP to the error state. 0 disarms.
  void FailNthOperation(uint64_t n);

  // A crash point: this NIC executes `k` more of the operations it initiates
  // and then its node dies (as SoftDevice::Kill): the (k+1)-th fails with
  // kRetryExceeded, and so does every later operation from it or aimed at it.
  // Every QP of the device counts, in execution order, so with one client
  // thread on the node, k is "the k-th work request of the next operation".
  // DisarmCrash() cancels a crash point not yet reached.
  void CrashAfterOperations(uint64_t k);
  void DisarmCrash();

  // The next NIC atomic that targets this NIC stops after reading the old
  // value and before writing the new one, until ResumeAtomic() or at most
  // kMaxAtomicPause (then it continues on its own, so a test that fails before
  // resuming cannot hang). This opens the window in which a CPU atomic on the
  // same word is lost (docs/design.md §3).
  static constexpr std::chrono::seconds kMaxAtomicPause{10};
  void PauseNextAtomic();
  // Blocks until an armed atomic has paused; false on timeout.
  bool WaitUntilAtomicPaused(std::chrono::milliseconds timeout);
  void ResumeAtomic();

  // Called after each aligned 8-byte word of this NIC's memory that a READ or
  // WRITE copies as one access, with the word's index counted from the first
  // whole aligned word of the transfer (unaligned head/tail bytes do not
  // count). Lets a test change memory mid-transfer. On a device with
  // byte_granular_copies it is called after every byte instead, with the
  // byte's offset in the transfer (0 = first byte).
  void SetCopyHook(std::function<void(uint64_t word_index)> hook);

  // Internal: used by the NIC engine.
  bool ShouldFailNextOperation();
  // True when the armed crash point is reached (the node must die now).
  bool ReachedCrashPoint();
  void MaybePauseAtomic();
  bool has_copy_hook() const { return has_copy_hook_.load(std::memory_order_acquire); }
  void OnCopiedWord(uint64_t index);  // also per byte in byte-granular mode

 private:
  std::atomic<uint64_t> fail_countdown_{0};
  // Operations left before the crash point, plus one; 0 = disarmed.
  std::atomic<uint64_t> crash_countdown_{0};
  // std::mutex, not absl::Mutex: TSan must see every lock (Debian's Abseil
  // is not TSan-instrumented).
  std::mutex mu_;
  std::condition_variable cv_;
  bool pause_armed_ = false;
  bool paused_ = false;
  bool resume_ = false;
  std::atomic<bool> has_copy_hook_{false};
  std::function<void(uint64_t)> copy_hook_;
};

}  // namespace rdma::soft

#endif  // RDMA_SOFT_FAULT_INJECTOR_H_
