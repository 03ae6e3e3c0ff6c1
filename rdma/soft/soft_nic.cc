#include "rdma/soft/soft_nic.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rdma::soft {
namespace {

using Clock = std::chrono::steady_clock;

struct PendingWr {
  WorkRequest wr;
  absl::InlinedVector<uint8_t, 64> inline_payload;
  Clock::time_point ready_at;
};

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

}  // namespace

// The NIC-side state of one QP. Shared between its QueuePair handle, the
// network registry, the CQ (for helping) and the engine.
struct QpCore {
  uint32_t qp_num = 0;
  SoftDevice* device = nullptr;
  SoftCompletionQueue* cq = nullptr;
  uint32_t max_send_wr = 0;
  uint32_t max_inline = 0;

  std::mutex mu;
  std::deque<PendingWr> sq;
  QpState state = QpState::kReset;
  uint32_t remote_qp_num = 0;
  bool destroyed = false;
  std::atomic<bool> has_work{false};
  // Held by whoever executes this QP's WRs: keeps execution in order.
  std::mutex exec_mu;
};

class SoftCompletionQueue final : public CompletionQueue {
 public:
  SoftCompletionQueue(SoftDevice* device, int depth) : device_(device), depth_(depth) {}

  int Poll(absl::Span<Completion> out) override;
  int Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) override;

  void Push(const Completion& c) {
    device_->OnCompletion();
    std::lock_guard<std::mutex> l(mu_);
    completions_.push_back(c);
    cv_.notify_all();
  }
  void Attach(std::shared_ptr<QpCore> qp) {
    std::lock_guard<std::mutex> l(mu_);
    attached_.push_back(std::move(qp));
  }
  void Detach(QpCore* qp) {
    std::lock_guard<std::mutex> l(mu_);
    std::erase_if(attached_, [qp](const auto& p) { return p.get() == qp; });
  }

 private:
  int Pop(absl::Span<Completion> out) {
    int n = 0;
    while (n < static_cast<int>(out.size()) && !completions_.empty()) {
      out[n++] = completions_.front();
      completions_.pop_front();
    }
    return n;
  }
  bool HasCompletions() const { return !completions_.empty(); }

  SoftDevice* device_;
  [[maybe_unused]] int depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Completion> completions_;
  std::vector<std::shared_ptr<QpCore>> attached_;
};

namespace {

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
  if (local.faults().ShouldFailNextOperation()) return fail(CompletionStatus::kRemoteOperationError);
  if (local.is_dead()) return fail(CompletionStatus::kRetryExceeded);

  std::shared_ptr<QpCore> target = local.network().FindQp(remote_qp_num);
  if (target == nullptr) return fail(CompletionStatus::kRetryExceeded);
  {
    std::lock_guard<std::mutex> l(target->mu);
    if (target->destroyed || target->state != QpState::kReadyToSend) {
      return fail(CompletionStatus::kRetryExceeded);
    }
  }
  SoftDevice& remote = *target->device;
  if (remote.is_dead()) return fail(CompletionStatus::kRetryExceeded);

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

// Moves `qp` to the error state and returns flush completions for every WR
// still queued (verbs generates them whether signaled or not).
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

// Executes the ready WRs of `qp` in order. Returns whether it did anything.
// Non-blocking: if another thread is executing this QP, leaves it to them.
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

}  // namespace

int SoftCompletionQueue::Poll(absl::Span<Completion> out) {
  std::vector<std::shared_ptr<QpCore>> qps;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (HasCompletions()) return Pop(out);
    qps = attached_;
  }
  // Lend this CPU to the NIC engine for our own QPs.
  for (auto& qp : qps) DrainQp(*qp);
  std::lock_guard<std::mutex> l(mu_);
  return Pop(out);
}

int SoftCompletionQueue::Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (mode == PollMode::kNotify) {
    // Block until the engine delivers; do not execute WRs on this thread.
    device_->AddNotifyWaiter(+1);
    device_->Doorbell();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_until(l, deadline, [this] { return HasCompletions(); });
    device_->AddNotifyWaiter(-1);
    return Pop(out);
  }
  for (int spins = 0;; ++spins) {
    int n = Poll(out);
    if (n > 0) return n;
    if (Clock::now() >= deadline) return 0;
    if (spins >= 64) std::this_thread::yield();  // 2-core machines: let the engine run
  }
}

// ------------------------------------------------------------ QueuePair

class SoftQueuePair final : public QueuePair {
 public:
  explicit SoftQueuePair(std::shared_ptr<QpCore> core) : core_(std::move(core)) {}
  ~SoftQueuePair() override {
    core_->device->DetachQp(core_.get());
    core_->cq->Detach(core_.get());
    core_->device->network().UnregisterQp(core_->qp_num);
    std::lock_guard<std::mutex> exec(core_->exec_mu);
    std::lock_guard<std::mutex> l(core_->mu);
    core_->destroyed = true;
    core_->sq.clear();
  }

  uint32_t qp_num() const override { return core_->qp_num; }
  QpEndpoint endpoint() const override {
    QpEndpoint ep;
    ep.node = core_->device->node();
    ep.qp_num = core_->qp_num;
    ep.psn = core_->qp_num * 2654435761u & 0xffffff;
    ep.lid = core_->device->node();
    ep.gid[15] = static_cast<uint8_t>(core_->device->node());
    ep.gid[14] = static_cast<uint8_t>(core_->device->node() >> 8);
    return ep;
  }
  QpState state() const override {
    std::lock_guard<std::mutex> l(core_->mu);
    return core_->state;
  }

  absl::Status Connect(const QpEndpoint& remote) override {
    std::lock_guard<std::mutex> l(core_->mu);
    if (core_->state != QpState::kReset) {
      return absl::FailedPreconditionError(
          absl::StrCat("QP ", core_->qp_num, " is in ", QpStateName(core_->state), "; Reset it before Connect"));
    }
    core_->remote_qp_num = remote.qp_num;
    core_->state = QpState::kReadyToSend;
    return absl::OkStatus();
  }

  absl::Status Reset() override {
    std::vector<Completion> flushed;
    {
      std::lock_guard<std::mutex> exec(core_->exec_mu);
      std::lock_guard<std::mutex> l(core_->mu);
      flushed = EnterErrorLocked(*core_);
      core_->state = QpState::kReset;
    }
    for (const Completion& f : flushed) core_->cq->Push(f);
    return absl::OkStatus();
  }

  absl::Status Post(absl::Span<const WorkRequest> chain) override {
    const auto ready_at = Clock::now() + core_->device->latency();
    {
      std::lock_guard<std::mutex> l(core_->mu);
      if (core_->state != QpState::kReadyToSend) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot post to QP ", core_->qp_num, ": it is in ", QpStateName(core_->state),
            core_->state == QpState::kError ? " (an earlier work request failed; Reset and Connect it again)"
                                            : " (not connected)"));
      }
      if (core_->sq.size() + chain.size() > core_->max_send_wr) {
        return absl::ResourceExhaustedError(absl::StrCat("QP ", core_->qp_num, ": send queue full (",
                                                         core_->max_send_wr, " WRs)"));
      }
      for (const WorkRequest& wr : chain) {
        const bool atomic = wr.opcode == Opcode::kCompareSwap || wr.opcode == Opcode::kFetchAdd;
        if (atomic && core_->device->caps().atomic_scope == DeviceCaps::AtomicScope::kNone) {
          return absl::InvalidArgumentError(absl::StrCat("atomic WR ", wr.wr_id, ": device ", core_->device->name(),
                                                         " offers no RDMA atomics (atomic_cap=NONE)"));
        }
        if (atomic && (wr.length != 8 || wr.remote_addr % 8 != 0)) {
          // As rxe and mlx5 do at ibv_post_send (EINVAL): nothing is posted.
          return absl::InvalidArgumentError(absl::StrCat("atomic WR ", wr.wr_id, " needs length 8 and an 8-byte aligned remote address"));
        }
        if (wr.inline_data && (wr.opcode != Opcode::kWrite || wr.length > core_->max_inline)) {
          return absl::InvalidArgumentError(absl::StrCat("inline data only for WRITEs of at most ",
                                                         core_->max_inline, " bytes (got ", wr.length, ")"));
        }
      }
      core_->device->OnPosted(chain);
      for (const WorkRequest& wr : chain) {
        PendingWr p{wr, {}, ready_at};
        if (wr.inline_data) {
          const auto* b = static_cast<const uint8_t*>(wr.local);
          p.inline_payload.assign(b, b + wr.length);
        }
        core_->sq.push_back(std::move(p));
      }
      core_->has_work.store(true, std::memory_order_release);
    }
    core_->device->Doorbell();
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<QpCore> core_;
};

// ------------------------------------------------------------ MemoryRegion

class SoftMemoryRegion final : public MemoryRegion {
 public:
  SoftMemoryRegion(SoftDevice* device, void* addr, size_t length, uint32_t key, uint32_t access)
      : device_(device), addr_(addr), length_(length), key_(key), access_(access) {}
  ~SoftMemoryRegion() override { device_->DeregisterRegion(key_); }
  void* addr() const override { return addr_; }
  size_t length() const override { return length_; }
  uint32_t lkey() const override { return key_; }
  uint32_t rkey() const override { return key_; }
  uint32_t access() const override { return access_; }

 private:
  SoftDevice* device_;
  void* addr_;
  size_t length_;
  uint32_t key_;
  uint32_t access_;
};

// ------------------------------------------------------------ SoftNetwork

uint32_t SoftNetwork::RegisterQp(std::shared_ptr<QpCore> qp) {
  std::lock_guard<std::mutex> l(mu_);
  const uint32_t n = next_qp_num_++;
  qps_[n] = qp;
  return n;
}

void SoftNetwork::UnregisterQp(uint32_t qp_num) {
  std::lock_guard<std::mutex> l(mu_);
  qps_.erase(qp_num);
}

std::shared_ptr<QpCore> SoftNetwork::FindQp(uint32_t qp_num) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = qps_.find(qp_num);
  return it == qps_.end() ? nullptr : it->second.lock();
}

// ------------------------------------------------------------ SoftDevice

SoftDevice::SoftDevice(NodeId node, std::shared_ptr<SoftNetwork> network, const SoftDeviceOptions& options)
    : node_(node),
      network_(std::move(network)),
      latency_ns_(options.latency.count()),
      byte_granular_copies_(options.byte_granular_copies),
      byte_copies_descending_(options.byte_copies_descending) {
  caps_.atomic_scope = options.atomics ? DeviceCaps::AtomicScope::kHca : DeviceCaps::AtomicScope::kNone;
  caps_.max_inline_data = 256;
  caps_.max_send_wr = 16384;
  caps_.max_mr_size = uint64_t{1} << 40;
  engine_ = std::thread([this] { EngineLoop(); });
}

SoftDevice::~SoftDevice() {
  {
    std::lock_guard<std::mutex> l(engine_mu_);
    engine_stop_ = true;
  }
  engine_cv_.notify_all();
  engine_.join();
}

std::string SoftDevice::name() const { return absl::StrCat("soft", node_); }

absl::StatusOr<std::unique_ptr<MemoryRegion>> SoftDevice::RegisterMemory(void* addr, size_t length,
                                                                         uint32_t access) {
  if (addr == nullptr || length == 0) {
    return absl::InvalidArgumentError("RegisterMemory: null address or zero length");
  }
  if ((access & (kRemoteWrite | kRemoteAtomic)) != 0 && (access & kLocalWrite) == 0) {
    // Verbs rejects this combination (EINVAL); so do we, so code that passes
    // on the soft NIC does not fail on hardware.
    return absl::InvalidArgumentError("RegisterMemory: remote write or remote atomic access requires local write");
  }
  if (length > caps_.max_mr_size) {
    return absl::InvalidArgumentError(absl::StrCat("RegisterMemory: ", length, " bytes exceeds max_mr_size"));
  }
  std::lock_guard<std::mutex> l(regions_mu_);
  const uint32_t key = next_key_++;
  regions_[key] = RegionInfo{reinterpret_cast<uintptr_t>(addr), length, access};
  return std::make_unique<SoftMemoryRegion>(this, addr, length, key, access);
}

bool SoftDevice::FindRegion(uint32_t key, RegionInfo* out) {
  std::lock_guard<std::mutex> l(regions_mu_);
  auto it = regions_.find(key);
  if (it == regions_.end()) return false;
  *out = it->second;
  return true;
}

void SoftDevice::DeregisterRegion(uint32_t key) {
  std::lock_guard<std::mutex> l(regions_mu_);
  regions_.erase(key);
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> SoftDevice::CreateCompletionQueue(int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("CreateCompletionQueue: depth must be positive");
  return std::make_unique<SoftCompletionQueue>(this, depth);
}

absl::StatusOr<std::unique_ptr<QueuePair>> SoftDevice::CreateQueuePair(CompletionQueue* send_cq,
                                                                       const QpOptions& options) {
  auto* cq = dynamic_cast<SoftCompletionQueue*>(send_cq);
  if (cq == nullptr) return absl::InvalidArgumentError("CreateQueuePair: CQ is not from a soft device");
  if (options.max_send_wr == 0 || options.max_send_wr > caps_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat("max_send_wr must be in 1..", caps_.max_send_wr));
  }
  if (options.max_inline_data > caps_.max_inline_data) {
    return absl::InvalidArgumentError(absl::StrCat("max_inline_data must be <= ", caps_.max_inline_data));
  }
  auto core = std::make_shared<QpCore>();
  core->device = this;
  core->cq = cq;
  core->max_send_wr = options.max_send_wr;
  core->max_inline = options.max_inline_data;
  core->qp_num = network_->RegisterQp(core);
  if (is_dead()) {
    std::lock_guard<std::mutex> l(core->mu);
    core->state = QpState::kError;
  }
  AttachQp(core);
  cq->Attach(core);
  return std::make_unique<SoftQueuePair>(std::move(core));
}

void SoftDevice::AttachQp(const std::shared_ptr<QpCore>& qp) {
  std::lock_guard<std::mutex> l(qps_mu_);
  qps_.push_back(qp);
}

void SoftDevice::DetachQp(QpCore* qp) {
  std::lock_guard<std::mutex> l(qps_mu_);
  std::erase_if(qps_, [qp](const std::weak_ptr<QpCore>& w) {
    auto s = w.lock();
    return s == nullptr || s.get() == qp;
  });
}

void SoftDevice::OnPosted(absl::Span<const WorkRequest> chain) {
  doorbells_.fetch_add(1, std::memory_order_relaxed);
  wrs_posted_.fetch_add(chain.size(), std::memory_order_relaxed);
  for (const WorkRequest& wr : chain) {
    if (wr.signaled) signaled_wrs_.fetch_add(1, std::memory_order_relaxed);
    if (wr.fence) fenced_wrs_.fetch_add(1, std::memory_order_relaxed);
    if (wr.inline_data) inline_wrs_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!has_post_hook_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> l(post_hook_mu_);
  if (post_hook_) {
    for (const WorkRequest& wr : chain) post_hook_(wr);
  }
}

void SoftDevice::SetAtomicsSupported(bool supported) {
  caps_.atomic_scope = supported ? DeviceCaps::AtomicScope::kHca : DeviceCaps::AtomicScope::kNone;
}

SoftNicStats SoftDevice::stats() const {
  SoftNicStats s;
  s.wrs_posted = wrs_posted_.load(std::memory_order_relaxed);
  s.signaled_wrs = signaled_wrs_.load(std::memory_order_relaxed);
  s.fenced_wrs = fenced_wrs_.load(std::memory_order_relaxed);
  s.inline_wrs = inline_wrs_.load(std::memory_order_relaxed);
  s.completions = completions_.load(std::memory_order_relaxed);
  s.doorbells = doorbells_.load(std::memory_order_relaxed);
  return s;
}

void SoftDevice::SetPostHook(std::function<void(const WorkRequest&)> hook) {
  std::lock_guard<std::mutex> l(post_hook_mu_);
  has_post_hook_.store(static_cast<bool>(hook), std::memory_order_release);
  post_hook_ = std::move(hook);
}

void SoftDevice::AddNotifyWaiter(int delta) { notify_waiters_.fetch_add(delta, std::memory_order_acq_rel); }

void SoftDevice::Doorbell() {
  // Busy pollers execute their own WRs; wake the engine only when somebody
  // sleeps on a completion channel. Otherwise it runs on its own tick.
  if (notify_waiters_.load(std::memory_order_acquire) == 0) return;
  {
    std::lock_guard<std::mutex> l(engine_mu_);
    engine_kick_ = true;
  }
  engine_cv_.notify_one();
}

void SoftDevice::Kill() {
  dead_.store(true, std::memory_order_release);
  std::vector<std::shared_ptr<QpCore>> qps;
  {
    std::lock_guard<std::mutex> l(qps_mu_);
    for (auto& w : qps_) {
      if (auto s = w.lock()) qps.push_back(std::move(s));
    }
  }
  for (auto& qp : qps) {
    std::vector<Completion> flushed;
    {
      std::lock_guard<std::mutex> exec(qp->exec_mu);
      std::lock_guard<std::mutex> l(qp->mu);
      if (qp->destroyed) continue;
      flushed = EnterErrorLocked(*qp);
    }
    for (const Completion& f : flushed) qp->cq->Push(f);
  }
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

// ------------------------------------------------------------ SoftFabric

SoftFabric::SoftFabric(const SoftDeviceOptions& options)
    : network_(std::make_shared<SoftNetwork>()), options_(options) {}

absl::StatusOr<std::unique_ptr<Device>> SoftFabric::OpenDevice(NodeId node) {
  return std::make_unique<SoftDevice>(node, network_, options_);
}

SoftDevice* AsSoftDevice(Device& device) { return dynamic_cast<SoftDevice*>(&device); }

}  // namespace rdma::soft
