#include "rdma/soft/fault_injector.h"


namespace rdma::soft {

void FaultInjector::FailNthOperation(uint64_t n) { fail_countdown_.store(n, std::memory_order_release); }

bool FaultInjector::ShouldFailNextOperation() {
  uint64_t c = fail_countdown_.load(std::memory_order_acquire);
  while (c != 0) {
    if (fail_countdown_.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) return c == 1;
  }
  return false;
}

void FaultInjector::CrashAfterOperations(uint64_t k) { crash_countdown_.store(k + 1, std::memory_order_release); }

void FaultInjector::DisarmCrash() { crash_countdown_.store(0, std::memory_order_release); }

bool FaultInjector::ReachedCrashPoint() {
  uint64_t c = crash_countdown_.load(std::memory_order_acquire);
  while (c != 0) {
    if (crash_countdown_.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) return c == 1;
  }
  return false;
}

void FaultInjector::PauseNextAtomic() {
  std::lock_guard<std::mutex> l(mu_);
  pause_armed_ = true;
  paused_ = false;
  resume_ = false;
}

bool FaultInjector::WaitUntilAtomicPaused(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [this] { return paused_; });
}

void FaultInjector::ResumeAtomic() {
  std::lock_guard<std::mutex> l(mu_);
  resume_ = true;
  cv_.notify_all();
}

void FaultInjector::MaybePauseAtomic() {
  std::unique_lock<std::mutex> l(mu_);
  if (!pause_armed_) return;
  pause_armed_ = false;
  paused_ = true;
  cv_.notify_all();
  // Bounded: a test that fails before ResumeAtomic() must not hang the NIC
  // (and with it the whole test binary) until Bazel kills it.
  cv_.wait_for(l, kMaxAtomicPause, [this] { return resume_; });
  paused_ = false;
  resume_ = false;
}

void FaultInjector::SetCopyHook(std::function<void(uint64_t)> hook) {
  std::lock_guard<std::mutex> l(mu_);
  has_copy_hook_.store(static_cast<bool>(hook), std::memory_order_release);
  copy_hook_ = std::move(hook);
}

void FaultInjector::OnCopiedWord(uint64_t index) {
  std::function<void(uint64_t)> hook;
  {
    std::lock_guard<std::mutex> l(mu_);
    hook = copy_hook_;
  }
  if (hook) hook(index);
}

}  // namespace rdma::soft
