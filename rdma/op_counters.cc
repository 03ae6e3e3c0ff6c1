#include "rdma/op_counters.h"

namespace rdma {

OpCounters& ThisThreadCounters() {
  thread_local OpCounters counters;
  return counters;
}

}  // namespace rdma
