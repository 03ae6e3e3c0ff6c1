#include "tools/demo/measure.h"

#include <iostream>

#include "absl/strings/str_format.h"

namespace demo {

void PrintRows(const std::vector<Row>& rows) {
  std::cout << absl::StrFormat("%-9s %-8s %8s %10s %12s %7s %10s\n", "path", "op", "nic_ops", "doorbells",
                               "round_trips", "bytes", "ns/op");
  for (const Row& r : rows) {
    std::cout << absl::StrFormat("%-9s %-8s %8d %10d %12d %7d %10d\n", r.path, r.op, r.cost.nic_ops,
                                 r.cost.doorbells, r.cost.round_trips, r.cost.bytes, r.ns);
  }
}

}  // namespace demo
