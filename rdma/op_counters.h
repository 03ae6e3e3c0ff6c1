#ifndef RDMA_OP_COUNTERS_H_
#define RDMA_OP_COUNTERS_H_

#include <cstdint>

namespace rdma {

// Hardware-independent cost counts (docs/design.md §8), kept per thread so that the
// hot path never shares a cache line. rdma::Session bumps them; benchmarks
// read deltas around the measured region:
//   const OpCounters before = ThisThreadCounters();
//   ...;  // the measured operation
//   const OpCounters cost = ThisThreadCounters() - before;
struct OpCounters {
  uint64_t nic_ops = 0;      // work requests handed to a NIC
  uint64_t doorbells = 0;    // post calls (one doorbell per chain)
  uint64_t round_trips = 0;  // times the caller blocked on a completion
  uint64_t bytes = 0;        // payload bytes moved (READ/WRITE length, 8 per atomic)

  OpCounters& operator+=(const OpCounters& o) {
    nic_ops += o.nic_ops;
    doorbells += o.doorbells;
    round_trips += o.round_trips;
    bytes += o.bytes;
    return *this;
  }
  friend OpCounters operator-(OpCounters a, const OpCounters& b) {
    a.nic_ops -= b.nic_ops;
    a.doorbells -= b.doorbells;
    a.round_trips -= b.round_trips;
    a.bytes -= b.bytes;
    return a;
  }
  friend bool operator==(const OpCounters&, const OpCounters&) = default;
};

// The calling thread's counters. Never reset behind the caller's back.
OpCounters& ThisThreadCounters();

}  // namespace rdma

#endif  // RDMA_OP_COUNTERS_H_
