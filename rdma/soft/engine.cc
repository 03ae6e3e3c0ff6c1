// The soft NIC's engine: executing one WR (checks, copies, atomics) and
// draining a QP's send queue in order, on the engine thread or a poller's.

#include <algorithm>
#include <atomic>
#include <cstring>

#include "rdma/soft/soft_nic_internal.h"

namespace rdma::soft {
namespace {

// Moves `len` bytes between the initiator's buffer `local` and target memory
// `remote` (to_remote: WRITE; else READ) the way a NIC DMA engine does: every
// aligned 8-byte word of remote memory the transfer covers fully is one
// single-copy-atomic 8-byte access (so it never tears, docs/design.md §3), and only
// the unaligned head and tail bytes are moved byte by byte. The copy hook
// fires after each such word, numbered from 0 at the first whole word. The
// local side has no such guarantee (it is the poster's own buffer), so it is
// accessed with memcpy and may be misaligned.
//
// With `byte_granular` (SoftDeviceOptions::byte_granular_copies) every byte
// is its own atomic access, in ascending order, and the hook fires after each
// byte with its offset: rxe's memcpy, which can tear an aligned word. With
// `descending` the bytes go last to first.
// Release/acquire per byte (rather than relaxed) keeps the happens-before
// edge the word mode gives: a CPU thread that acquire-loads a word and sees
// the first byte of a WRITE also sees what the poster wrote before posting,
// so TSan does not report the protocol data behind a lock word as racing.
void NicCopy(void* local, void* remote, size_t len, bool to_remote, bool byte_granular, bool descending,
             FaultInjector* hooks) {
  auto* lb = static_cast<uint8_t*>(local);
  auto* rb = static_cast<uint8_t*>(remote);
  const bool hooked = hooks != nullptr && hooks->has_copy_hook();
  auto copy_byte = [&](size_t i) {
    std::atomic_ref<uint8_t> r(rb[i]);
    if (to_remote) {
      r.store(lb[i], std::memory_order_release);
    } else {
      lb[i] = r.load(std::memory_order_acquire);
    }
  };
  if (byte_granular) {
    for (size_t k = 0; k < len; ++k) {
      const size_t i = descending ? len - 1 - k : k;
      copy_byte(i);
      if (hooked) hooks->OnCopiedWord(i);
    }
    return;
  }
  const size_t misalign = reinterpret_cast<uintptr_t>(remote) % 8;
  const size_t head = std::min(len, misalign == 0 ? size_t{0} : 8 - misalign);
  size_t i = 0;
  for (; i < head; ++i) copy_byte(i);
  for (uint64_t word = 0; len - i >= 8; i += 8, ++word) {
    auto* rw = reinterpret_cast<uint64_t*>(rb + i);
    uint64_t v;
    if (to_remote) {
      std::memcpy(&v, lb + i, 8);
      __atomic_store_n(rw, v, __ATOMIC_RELEASE);
    } else {
      v = __atomic_load_n(rw, __ATOMIC_ACQUIRE);
      std::memcpy(lb + i, &v, 8);
    }
    if (hooked) hooks->OnCopiedWord(word);
  }
  for (; i < len; ++i) copy_byte(i);
}

// Executes one WR of `qp`, targeting the QP `remote_qp_num`. Returns its
// completion (status set); the caller moves the QP to error on failure.
Completion Execute(QpCore& qp, PendingWr& p, uint32_t remote_qp_num) {
  const WorkRequest& wr = p.wr;
  Completion c{wr.wr_id, wr.opcode, CompletionStatus::kSuccess, wr.length, qp.qp_num};
  auto fail = [&c](CompletionStatus s) {
    c.status = s;
    c.byte_len = 0;
    return c;
  };
  SoftDevice& local = *qp.device;
  // While this runs, the device is not declared dead (SoftDevice::is_dead).
  local.BeginExecute();
  struct EndExecute {
    SoftDevice& d;
    ~EndExecute() { d.EndExecute(); }
  } end_execute{local};
  if (local.faults().ShouldFailNextOperation()) return fail(CompletionStatus::kRemoteOperationError);
  if (local.faults().ReachedCrashPoint()) local.StartDying();
  if (local.is_dying()) return fail(CompletionStatus::kRetryExceeded);

  std::shared_ptr<QpCore> target = local.network().FindQp(remote_qp_num);
  if (target == nullptr) return fail(CompletionStatus::kRetryExceeded);
  {
    std::lock_guard<std::mutex> l(target->mu);
    if (target->destroyed || target->state != QpState::kReadyToSend) {
      return fail(CompletionStatus::kRetryExceeded);
    }
  }
  SoftDevice& remote = *target->device;
  if (remote.is_dying()) return fail(CompletionStatus::kRetryExceeded);

  const bool is_atomic = wr.opcode == Opcode::kCompareSwap || wr.opcode == Opcode::kFetchAdd;
  void* local_buf = wr.local;
  if (wr.inline_data) {
    local_buf = p.inline_payload.data();
  } else {
    SoftDevice::RegionInfo lr;
    const uint32_t need_local = wr.opcode == Opcode::kWrite ? 0u : static_cast<uint32_t>(kLocalWrite);
    const auto addr = reinterpret_cast<uintptr_t>(wr.local);
    if (!local.FindRegion(wr.lkey, &lr) || addr < lr.base || wr.length > lr.length ||
        addr - lr.base > lr.length - wr.length || (lr.access & need_local) != need_local) {
      return fail(CompletionStatus::kLocalProtectionError);
    }
  }
  if (is_atomic && (wr.length != 8 || wr.remote_addr % 8 != 0 ||
                    remote.caps().atomic_scope == DeviceCaps::AtomicScope::kNone)) {
    return fail(CompletionStatus::kRemoteInvalidRequest);  // the responder cannot do it
  }
  uint32_t need_remote = kRemoteRead;
  if (wr.opcode == Opcode::kWrite) need_remote = kRemoteWrite;
  if (is_atomic) need_remote = kRemoteAtomic;
  SoftDevice::RegionInfo rr;
  if (!remote.FindRegion(wr.rkey, &rr) || wr.remote_addr < rr.base || wr.length > rr.length ||
      wr.remote_addr - rr.base > rr.length - wr.length || (rr.access & need_remote) != need_remote) {
    // The responder NAKs and its QP goes to the error state too.
    std::lock_guard<std::mutex> l(target->mu);
    target->state = QpState::kError;
    return fail(CompletionStatus::kRemoteAccessError);
  }

  void* remote_buf = reinterpret_cast<void*>(static_cast<uintptr_t>(wr.remote_addr));
  switch (wr.opcode) {
    case Opcode::kRead:
      NicCopy(local_buf, remote_buf, wr.length, /*to_remote=*/false, remote.byte_granular_copies(),
              remote.byte_copies_descending(), &remote.faults());
      break;
    case Opcode::kWrite:
      NicCopy(local_buf, remote_buf, wr.length, /*to_remote=*/true, remote.byte_granular_copies(),
              remote.byte_copies_descending(), &remote.faults());
      break;
    case Opcode::kCompareSwap:
    case Opcode::kFetchAdd: {
      // Atomic among NIC atomics on this device only: a CPU atomic on the
      // same word does not take this lock and can be lost (docs/design.md §3).
      auto* word = static_cast<uint64_t*>(remote_buf);
      uint64_t old;
      {
        std::lock_guard<std::mutex> g(remote.AtomicStripe(wr.remote_addr));
        old = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        remote.faults().MaybePauseAtomic();
        if (wr.opcode == Opcode::kFetchAdd) {
          __atomic_store_n(word, old + wr.compare_add, __ATOMIC_RELEASE);
        } else if (old == wr.compare_add) {
          __atomic_store_n(word, wr.swap, __ATOMIC_RELEASE);
        }
      }
      std::memcpy(local_buf, &old, 8);  // into the poster's own buffer
      break;
    }
  }
  return c;
}

}  // namespace

std::vector<Completion> EnterErrorLocked(QpCore& qp) {
  std::vector<Completion> flushed;
  qp.state = QpState::kError;
  for (const PendingWr& p : qp.sq) {
    flushed.push_back({p.wr.wr_id, p.wr.opcode, CompletionStatus::kFlushed, 0, qp.qp_num});
  }
  qp.sq.clear();
  qp.has_work.store(false, std::memory_order_release);
  return flushed;
}

bool DrainQp(QpCore& qp) {
  if (!qp.has_work.load(std::memory_order_acquire)) return false;
  std::unique_lock<std::mutex> exec(qp.exec_mu, std::try_to_lock);
  if (!exec.owns_lock()) return false;
  bool progress = false;
  for (;;) {
    PendingWr p;
    uint32_t remote;
    {
      std::lock_guard<std::mutex> l(qp.mu);
      if (qp.destroyed || qp.sq.empty()) {
        qp.has_work.store(false, std::memory_order_release);
        break;
      }
      if (qp.sq.front().ready_at > Clock::now()) break;  // injected latency
      p = std::move(qp.sq.front());
      qp.sq.pop_front();
      remote = qp.remote_qp_num;
    }
    progress = true;
    Completion c = Execute(qp, p, remote);
    if (c.status != CompletionStatus::kSuccess) {
      std::vector<Completion> flushed;
      {
        std::lock_guard<std::mutex> l(qp.mu);
        flushed = EnterErrorLocked(qp);
      }
      qp.cq->Push(c);
      for (const Completion& f : flushed) qp.cq->Push(f);
      break;
    }
    if (p.wr.signaled) qp.cq->Push(c);
  }
  return progress;
}

void SoftDevice::EngineLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(engine_mu_);
      engine_cv_.wait_for(l, std::chrono::microseconds(200), [this] { return engine_stop_ || engine_kick_; });
      if (engine_stop_) return;
      engine_kick_ = false;
    }
    std::vector<std::shared_ptr<QpCore>> qps;
    {
      std::lock_guard<std::mutex> l(qps_mu_);
      for (auto& w : qps_) {
        if (auto s = w.lock()) qps.push_back(std::move(s));
      }
    }
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& qp : qps) progress |= DrainQp(*qp);
    }
  }
}

}  // namespace rdma::soft
