#include "rdma/remote_ptr.h"

#include <ios>

namespace rdma {
namespace {
thread_local NodeId this_thread_node = 0;
}  // namespace

NodeId ThisThreadNode() { return this_thread_node; }
void BindThisThreadToNode(NodeId node) { this_thread_node = node; }

std::ostream& operator<<(std::ostream& os, RemotePtr p) {
  return os << "node" << p.node() << ":0x" << std::hex << p.address() << std::dec;
}

}  // namespace rdma
