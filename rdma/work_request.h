#ifndef RDMA_WORK_REQUEST_H_
#define RDMA_WORK_REQUEST_H_

// The backend-neutral send work request that rdma::QueuePair::Post takes
// (rdma/device.h). Most code never builds one: rdma::Session and rdma::Batch
// do (docs/design.md §5).

#include <cstdint>
#include "absl/strings/string_view.h"

namespace rdma {

enum class Opcode : uint8_t {
  kRead,         // remote -> local
  kWrite,        // local -> remote
  kCompareSwap,  // 8-byte NIC-domain CAS; old value lands in the local buffer
  kFetchAdd,     // 8-byte NIC-domain FAA; old value lands in the local buffer
};
absl::string_view OpcodeName(Opcode op);

// One backend-neutral send work request, the analogue of ibv_send_wr with one
// SGE. The local buffer must lie in memory registered on the posting device
// (lkey); the remote range must lie in a region of the target with `rkey`.
struct WorkRequest {
  Opcode opcode = Opcode::kRead;
  uint64_t wr_id = 0;

  void* local = nullptr;  // source (WRITE) or destination (READ, atomics)
  uint32_t lkey = 0;
  uint32_t length = 0;  // must be 8 for atomics

  uint64_t remote_addr = 0;  // must be 8-byte aligned for atomics
  uint32_t rkey = 0;

  uint64_t compare_add = 0;  // CAS: expected value; FAA: addend
  uint64_t swap = 0;         // CAS: desired value

  // Generate a completion on success. Errors always complete (as in verbs).
  bool signaled = false;
  // WRITE only: the payload is copied at post time, so `local` may be reused
  // (and need not be registered) once Post returns. length <= max_inline_data.
  bool inline_data = false;
  // Do not start this WR before all earlier READs and atomics on the QP have
  // completed (IBV_SEND_FENCE). Needed when it consumes their results.
  bool fence = false;
};

}  // namespace rdma

#endif  // RDMA_WORK_REQUEST_H_
