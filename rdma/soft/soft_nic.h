#ifndef RDMA_SOFT_SOFT_NIC_H_
#define RDMA_SOFT_SOFT_NIC_H_

// The in-process software RNIC: a faithful test double for a verbs device
// (docs/design.md §6.1). Each node has its own SoftDevice; all devices opened
// from one SoftFabric share a simulated network.
//
//   SoftFabric fabric;                         // or rdma::OpenFabric(soft)
//   auto dev = fabric.OpenDevice(/*node=*/0);  // one NIC engine thread each
//   AsSoftDevice(**dev)->faults().FailNthOperation(3);  // tests only
//
// Contract:
//  * WRs execute asynchronously, strictly in order per QP, on the device's
//    engine thread; a thread polling its CQ may run its own QPs' pending WRs
//    (who runs the NIC changes, never what it does or in which order).
//  * rkey/lkey, bounds and access flags are checked; a violation completes
//    with an error, moves the QP to the error state and flushes later WRs.
//  * NIC atomics serialize only among NIC atomics on the target device (a
//    striped NIC-side lock around read-compute-write); they are NOT atomic
//    with CPU atomics on the same word (docs/design.md §3).
//  * READ/WRITE move each aligned 8-byte word with one atomic access, so
//    multi-word transfers can tear; byte_granular_copies emulates rxe.
//  * Fences are honoured trivially: execution per QP is already sequential.
//  * Thread safety: as rdma/device.h. All locks are std::mutex, which TSan
//    sees (Debian's Abseil is not TSan-instrumented).

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include <condition_variable>
#include <mutex>
#include "rdma/device.h"
#include "rdma/fabric.h"
#include "rdma/soft/fault_injector.h"

namespace rdma::soft {

class SoftDevice;
class SoftCompletionQueue;
struct QpCore;

// Shared by all devices of one fabric: QP numbers and device liveness.
class SoftNetwork {
 public:
  uint32_t RegisterQp(std::shared_ptr<QpCore> qp);
  void UnregisterQp(uint32_t qp_num);
  std::shared_ptr<QpCore> FindQp(uint32_t qp_num);

 private:
  std::mutex mu_;
  uint32_t next_qp_num_ = 0x100;
  absl::flat_hash_map<uint32_t, std::weak_ptr<QpCore>> qps_;
};

struct SoftDeviceOptions {
  std::chrono::nanoseconds latency{0};  // added to every operation
  // false: the device reports atomic_scope kNone (like ibv_query_device's
  // atomic_cap IBV_ATOMIC_NONE) and rejects atomic WRs at post.
  bool atomics = true;
  // Emulates Soft-RoCE (rxe), whose memcpy can place a payload a byte at a
  // time (docs/design.md §3, §6.2): this device, as the responder, copies
  // every READ and WRITE payload one atomic byte at a time in ascending
  // address order, so an aligned word is NOT single-copy atomic against CPU
  // accesses. NIC atomics stay whole. The copy hook fires after every byte
  // (with its index in the transfer) instead of every word. Default false:
  // aligned words are single-copy atomic.
  bool byte_granular_copies = false;
  // With byte_granular_copies: copy each transfer from its last byte to its
  // first, an order no known NIC uses, to probe code that relies on ascending.
  bool byte_copies_descending = false;
};

// What a soft NIC has seen, for tests that check how the layers above use the
// NIC (selective signaling, fences, inline data). Counts since creation;
// compare two snapshots.
struct SoftNicStats {
  uint64_t wrs_posted = 0;    // WRs accepted by Post on this device's QPs
  uint64_t signaled_wrs = 0;  // of those, with signaled set
  uint64_t fenced_wrs = 0;    // of those, with fence set
  uint64_t inline_wrs = 0;    // of those, with inline_data set
  uint64_t completions = 0;   // entries delivered to this device's CQs (incl. errors, flushes)
  uint64_t doorbells = 0;     // successful Post calls (one per chain)
  SoftNicStats operator-(const SoftNicStats& o) const {
    return {wrs_posted - o.wrs_posted, signaled_wrs - o.signaled_wrs, fenced_wrs - o.fenced_wrs,
            inline_wrs - o.inline_wrs, completions - o.completions, doorbells - o.doorbells};
  }
};

class SoftDevice final : public Device {
 public:
  SoftDevice(NodeId node, std::shared_ptr<SoftNetwork> network, const SoftDeviceOptions& options);
  ~SoftDevice() override;

  std::string name() const override;
  const DeviceCaps& caps() const override { return caps_; }
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                               uint32_t access) override;
  absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCompletionQueue(int depth) override;
  absl::StatusOr<std::unique_ptr<QueuePair>> CreateQueuePair(CompletionQueue* send_cq,
                                                             const QpOptions& options) override;

  NodeId node() const { return node_; }
  FaultInjector& faults() { return faults_; }
  void SetLatency(std::chrono::nanoseconds latency) { latency_ns_.store(latency.count()); }
  SoftNicStats stats() const;
  // Test knob: whether this device reports and executes RDMA atomics (see
  // SoftDeviceOptions::atomics). Call before anything reads caps() (before
  // creating sessions, locks or structures on any node of the fabric).
  void SetAtomicsSupported(bool supported);
  // Whether READ/WRITE payloads are copied a byte at a time (see
  // SoftDeviceOptions::byte_granular_copies). Test knob; may be flipped at
  // any time: a copy in flight finishes in the mode it started in.
  void SetByteGranularCopies(bool on) { byte_granular_copies_.store(on, std::memory_order_relaxed); }
  bool byte_granular_copies() const { return byte_granular_copies_.load(std::memory_order_relaxed); }
  void SetByteCopiesDescending(bool on) { byte_copies_descending_.store(on, std::memory_order_relaxed); }
  bool byte_copies_descending() const { return byte_copies_descending_.load(std::memory_order_relaxed); }
  // Test hook: called (on the posting thread) with every WR this device's QPs
  // accept, in post order, while the QP is locked: it must not call into the
  // NIC. nullptr removes it.
  void SetPostHook(std::function<void(const WorkRequest&)> hook);

  // Simulates the node dying: every QP of this device goes to the error
  // state (outstanding WRs flushed) and every operation aimed at it fails
  // with kRetryExceeded, as an RC transport timeout would.
  // The node's death has two steps. Dying: no work request of it (or aimed
  // at it) starts any more. Dead (is_dead, what the cluster declares): dying
  // and none of its work requests still executing, so nothing it posted
  // lands in anyone's memory after the declaration (the fence).
  void Kill();
  bool is_dead() const override { return dead_.load(std::memory_order_seq_cst); }
  bool is_dying() const { return dying_.load(std::memory_order_seq_cst); }
  // Kill without the flush: what a crash point does from inside the engine
  // (whose QP locks are held). Later operations fail as on a dead node.
  void StartDying();
  // Bracket each work request this device executes as the initiator.
  void BeginExecute() { executing_.fetch_add(1, std::memory_order_seq_cst); }
  void EndExecute();

  // --- NIC internals (used by the engine and by QPs/CQs of this device).
  struct RegionInfo {
    uintptr_t base = 0;
    size_t length = 0;
    uint32_t access = 0;
  };
  bool FindRegion(uint32_t key, RegionInfo* out);
  void DeregisterRegion(uint32_t key);
  void AttachQp(const std::shared_ptr<QpCore>& qp);
  void DetachQp(QpCore* qp);
  void Doorbell();
  void AddNotifyWaiter(int delta);
  void OnPosted(absl::Span<const WorkRequest> chain);
  void OnCompletion() { completions_.fetch_add(1, std::memory_order_relaxed); }
  std::mutex& AtomicStripe(uint64_t addr) { return atomic_stripes_[(addr >> 3) % kAtomicStripes]; }
  std::chrono::nanoseconds latency() const { return std::chrono::nanoseconds(latency_ns_.load()); }
  SoftNetwork& network() { return *network_; }

 private:
  void EngineLoop();

  static constexpr size_t kAtomicStripes = 1024;
  const NodeId node_;
  std::shared_ptr<SoftNetwork> network_;
  DeviceCaps caps_;
  std::atomic<int64_t> latency_ns_;
  std::atomic<bool> dying_{false};
  std::atomic<bool> dead_{false};
  std::atomic<int> executing_{0};
  std::atomic<bool> byte_granular_copies_;
  std::atomic<bool> byte_copies_descending_;
  std::atomic<int> notify_waiters_{0};
  FaultInjector faults_;
  std::mutex atomic_stripes_[kAtomicStripes];

  std::atomic<uint64_t> wrs_posted_{0}, signaled_wrs_{0}, fenced_wrs_{0}, inline_wrs_{0}, completions_{0},
      doorbells_{0};
  std::mutex post_hook_mu_;
  std::atomic<bool> has_post_hook_{false};
  std::function<void(const WorkRequest&)> post_hook_;

  std::mutex regions_mu_;
  uint32_t next_key_ = 0x1000;
  absl::flat_hash_map<uint32_t, RegionInfo> regions_;

  std::mutex qps_mu_;
  std::vector<std::weak_ptr<QpCore>> qps_;

  std::mutex engine_mu_;
  std::condition_variable engine_cv_;
  bool engine_stop_ = false;
  bool engine_kick_ = false;
  std::thread engine_;
};

class SoftFabric final : public Fabric {
 public:
  explicit SoftFabric(const SoftDeviceOptions& options = {});
  FabricKind kind() const override { return FabricKind::kSoft; }
  absl::StatusOr<std::unique_ptr<Device>> OpenDevice(NodeId node) override;

 private:
  std::shared_ptr<SoftNetwork> network_;
  SoftDeviceOptions options_;
};

// The SoftDevice behind `device`, or nullptr when it is another backend.
SoftDevice* AsSoftDevice(Device& device);

}  // namespace rdma::soft

#endif  // RDMA_SOFT_SOFT_NIC_H_
