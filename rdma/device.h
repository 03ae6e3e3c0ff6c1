#ifndef RDMA_DEVICE_H_
#define RDMA_DEVICE_H_

// The backend-neutral verbs objects: device (context + protection domain),
// memory region, completion queue and RC queue pair (docs/design.md §5).
// Backends implement them: rdma/soft (§6.1) and rdma/verbs.
//
//   auto mr = device.RegisterMemory(buf, len, kLocalWrite | kRemoteRead);
//   auto cq = device.CreateCompletionQueue(256);
//   auto qp = device.CreateQueuePair(cq->get(), QpOptions{});
//   (*qp)->Connect(peer_endpoint);             // endpoints swapped out of band
//   (*qp)->Post(chain);  (*cq)->Wait(out, PollMode::kBusy, timeout);
//
// Contract: a Device's objects must not outlive it, and QPs must not outlive
// their CQ. A QP is posted to, connected and reset by one thread at a time; its
// CQ may be polled by another. Errors are absl::Status (see each method) or
// error completions, never a silent hang. Code above rdma/ posts through
// rdma::Session (rdma/session.h) rather than these objects directly.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rdma/completion.h"
#include "rdma/remote_ptr.h"
#include "rdma/work_request.h"

namespace rdma {

// Access flags for memory registration. Register with the minimum needed.
enum Access : uint32_t {
  kLocalWrite = 1u << 0,    // the NIC may write into it (READ/atomic results)
  kRemoteRead = 1u << 1,
  kRemoteWrite = 1u << 2,
  kRemoteAtomic = 1u << 3,
};

// A registered memory region. Owned by the caller; deregisters on destruction.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const = 0;
  virtual size_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;

  bool Contains(const void* p, size_t n) const {
    auto b = reinterpret_cast<uintptr_t>(addr());
    auto x = reinterpret_cast<uintptr_t>(p);
    return x >= b && n <= length() && x - b <= length() - n;
  }
};

// How a thread waits for completions.
enum class PollMode {
  kBusy,    // spin on the CQ (default: lowest latency)
  kNotify,  // block on a completion channel (low CPU)
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Non-blocking. Fills up to out.size() completions, returns how many.
  virtual int Poll(absl::Span<Completion> out) = 0;
  // Blocks until at least one completion is available or `timeout` passes.
  // Returns the number polled (0 on timeout). Busy or notify per `mode`.
  virtual int Wait(absl::Span<Completion> out, PollMode mode,
                   std::chrono::nanoseconds timeout) = 0;
};

enum class QpState { kReset, kReadyToSend, kError };

// The state's name as error messages print it: "RESET", "RTS", "ERROR".
constexpr absl::string_view QpStateName(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kReadyToSend: return "RTS";
    case QpState::kError: return "ERROR";
  }
  return "?";
}

// Everything a peer needs to connect an RC QP to this one: the out-of-band
// exchange payload (QP number, PSN, GID, LID). Plain bytes, so it can cross a
// TCP socket unchanged.
struct QpEndpoint {
  NodeId node = 0;
  uint32_t qp_num = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
};

// A reliable-connected queue pair. Post is called by one thread at a time
// (the owner); completions arrive on the send CQ given at creation.
class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qp_num() const = 0;
  virtual QpEndpoint endpoint() const = 0;
  virtual QpState state() const = 0;

  // RESET -> ready to send, connected to `remote`. Connecting a QP to its own
  // endpoint, or to one on the same device, makes a loopback QP.
  virtual absl::Status Connect(const QpEndpoint& remote) = 0;
  // Any state -> RESET. Outstanding WRs are flushed first. Connect again after.
  virtual absl::Status Reset() = 0;

  // Posts a chain with one doorbell. Fails without posting anything if the
  // QP is not ready to send (FailedPrecondition: say which state and why), if
  // the chain exceeds the free send-queue slots (ResourceExhausted), or if a
  // WR is malformed (InvalidArgument: misaligned atomic, oversized inline).
  virtual absl::Status Post(absl::Span<const WorkRequest> chain) = 0;
};

// What the device can do, as reported by ibv_query_device (or emulated).
struct DeviceCaps {
  enum class AtomicScope { kNone, kHca, kGlobal };
  AtomicScope atomic_scope = AtomicScope::kHca;  // kHca: NIC-atomic only among NIC ops
  uint32_t max_inline_data = 0;
  uint32_t max_send_wr = 0;
  uint64_t max_mr_size = 0;
};
absl::string_view AtomicScopeName(DeviceCaps::AtomicScope s);

// Refuses a device whose NIC cannot do RDMA atomics (atomic_cap ==
// IBV_ATOMIC_NONE): FailedPrecondition naming `device_name`, what needs the
// atomics and what to do. With `need_global`, also refuses kHca (NIC atomics
// that are not atomic with CPU atomics): only a design that mixes CPU and NIC
// RMWs on one word would ask for that, and docs/design.md §3 says not to.
absl::Status RequireAtomics(const DeviceCaps& caps, bool need_global = false,
                            absl::string_view device_name = "the RDMA device");

struct QpOptions {
  uint32_t max_send_wr = 256;
  uint32_t max_inline_data = 64;
};

// A device context plus one protection domain.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual const DeviceCaps& caps() const = 0;

  // Registers [addr, addr+length). Fails with ResourceExhausted (and how to
  // raise RLIMIT_MEMLOCK) when the memlock limit is too low.
  virtual absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                                       uint32_t access) = 0;
  virtual absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCompletionQueue(int depth) = 0;
  // The QP starts in RESET; Connect it before posting.
  virtual absl::StatusOr<std::unique_ptr<QueuePair>> CreateQueuePair(CompletionQueue* send_cq,
                                                                     const QpOptions& options) = 0;
  // True once this device's node has died: the soft NIC's Kill or crash
  // point (rdma/soft/fault_injector.h). A verbs device never reports it: its
  // death is its process's, which the other processes' connectors see.
  virtual bool is_dead() const { return false; }
};

}  // namespace rdma

#endif  // RDMA_DEVICE_H_
