#include "rdma/soft/soft_nic.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "rdma/soft/soft_nic_internal.h"

// The soft device itself: memory regions, the network's QP registry, device
// life cycle, statistics and hooks, Kill, and the fabric. WR execution is in
// engine.cc, the CQ and QP handles in queues.cc.

namespace rdma::soft {
namespace {

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

}  // namespace

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

void SoftDevice::StartDying() {
  dying_.store(true, std::memory_order_seq_cst);
  if (executing_.load(std::memory_order_seq_cst) == 0) dead_.store(true, std::memory_order_seq_cst);
}

void SoftDevice::EndExecute() {
  if (executing_.fetch_sub(1, std::memory_order_seq_cst) == 1 && dying_.load(std::memory_order_seq_cst)) {
    dead_.store(true, std::memory_order_seq_cst);
  }
}

void SoftDevice::Kill() {
  StartDying();
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
  // Every QP's execution lock was taken after the device began dying: what
  // still runs fails at its first check, and the last one declares it.
  while (!is_dead()) std::this_thread::yield();
}

// ------------------------------------------------------------ SoftFabric

SoftFabric::SoftFabric(const SoftDeviceOptions& options)
    : network_(std::make_shared<SoftNetwork>()), options_(options) {}

absl::StatusOr<std::unique_ptr<Device>> SoftFabric::OpenDevice(NodeId node) {
  return std::make_unique<SoftDevice>(node, network_, options_);
}

SoftDevice* AsSoftDevice(Device& device) { return dynamic_cast<SoftDevice*>(&device); }

}  // namespace rdma::soft
