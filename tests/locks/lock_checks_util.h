#ifndef TESTS_LOCKS_LOCK_CHECKS_UTIL_H_
#define TESTS_LOCKS_LOCK_CHECKS_UTIL_H_

// What the lock checks (alock_checks_test, lock_word_checks_test,
// native_gate_checks_test) share: a two-node soft cluster, optionally copying
// NIC payloads a byte at a time as rxe does, and CopyGate, which holds one
// word a node's soft NIC copies until the test releases it (the soft NIC's
// copy hook). Soft NIC only.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"

namespace locks::testing {

// Holds node `n`'s NIC copies: the `at`-th copied word (1-based) from now on
// blocks, in the NIC, until Release() (10 s at most); every other copy runs.
class CopyGate {
 public:
  CopyGate(rdma::Cluster& cluster, rdma::NodeId n, int at)
      : faults_(rdma::soft::AsSoftDevice(cluster.node(n).device())->faults()) {
    faults_.SetCopyHook([this, at](uint64_t) {
      if (calls_.fetch_add(1) + 1 != at) return;
      reached_.store(true);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!released_.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  }
  ~CopyGate() {
    Release();
    faults_.SetCopyHook(nullptr);
  }
  // Waits until the copy is held; false after 20 s.
  bool WaitReached() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!reached_.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    return reached_.load();
  }
  void Release() { released_.store(true); }

 private:
  rdma::soft::FaultInjector& faults_;
  std::atomic<int> calls_{0};
  std::atomic<bool> reached_{false}, released_{false};
};

// With `byte_copies`, every NIC copies READ/WRITE payloads a byte at a time,
// as rxe does.
inline std::unique_ptr<rdma::Cluster> TwoSoftNodes(bool byte_copies = false) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.node.arena_bytes = 2 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  o.fabric.soft_byte_granular_copies = byte_copies;
  return std::move(*rdma::Cluster::Create(o));
}

}  // namespace locks::testing

#endif  // TESTS_LOCKS_LOCK_CHECKS_UTIL_H_
