#ifndef TESTING_OP_COST_H_
#define TESTING_OP_COST_H_

// What the structures' cost tests measure: the calling thread's NIC counters
// (rdma::ThisThreadCounters, docs/design.md §8) across one operation.
//
//   const rdma::OpCounters c = rdma::testing::CostOf([&] { ASSERT_TRUE(client->Get(k).ok()); });
//   rdma::testing::PrintCost("remote get", c);
//   EXPECT_EQ(c.round_trips, 1);
//
// Contract: counts only what the calling thread does (operations run on other
// threads inside `op` are not counted). Header-only; adds two counter reads.

#include <cstdio>
#include <string>

#include "rdma/op_counters.h"

namespace rdma::testing {

// The counters op() adds on this thread.
template <typename Op>
OpCounters CostOf(Op&& op) {
  const OpCounters before = ThisThreadCounters();
  op();
  return ThisThreadCounters() - before;
}

// One line: `what` and the four counts (visible in the test log).
inline void PrintCost(const std::string& what, const OpCounters& o) {
  std::printf("%-32s nic_ops %llu doorbells %llu round_trips %llu bytes %llu\n", what.c_str(),
              static_cast<unsigned long long>(o.nic_ops), static_cast<unsigned long long>(o.doorbells),
              static_cast<unsigned long long>(o.round_trips), static_cast<unsigned long long>(o.bytes));
}

}  // namespace rdma::testing

#endif  // TESTING_OP_COST_H_
