#ifndef RDMA_REMOTE_PTR_H_
#define RDMA_REMOTE_PTR_H_

// RemotePtr, a global address (node id + virtual address), and the node the
// calling thread runs on (ThisThreadNode). docs/design.md §2 says when a
// pointer is used by the CPU and when through the NIC.
//
//   RemotePtr p(/*node=*/2, arena_base + 128);
//   if (p.is_local()) v = *p.local<uint64_t>();  // CPU, on node 2 only
//   else v = *session.Read64(p);                 // NIC

#include <cstdint>
#include <functional>
#include <ostream>

namespace rdma {

using NodeId = uint16_t;

// A 64-bit global address: a 16-bit node id over a 48-bit virtual address in
// that node's address space. The address is meaningful only on the owning
// node; everybody else must go through the NIC. Trivially copyable, so it can
// itself live in registered memory and be moved by RDMA READ/WRITE/CAS.
//
// The all-zero value is the null pointer (node 0, address 0).
class RemotePtr {
 public:
  static constexpr int kAddressBits = 48;
  static constexpr uint64_t kAddressMask = (uint64_t{1} << kAddressBits) - 1;

  constexpr RemotePtr() = default;
  constexpr RemotePtr(NodeId node, uint64_t address)
      : raw_((uint64_t{node} << kAddressBits) | (address & kAddressMask)) {}
  RemotePtr(NodeId node, const void* address)
      : RemotePtr(node, reinterpret_cast<uintptr_t>(address)) {}

  static constexpr RemotePtr FromRaw(uint64_t raw) {
    RemotePtr p;
    p.raw_ = raw;
    return p;
  }

  constexpr uint64_t raw() const { return raw_; }
  constexpr NodeId node() const { return static_cast<NodeId>(raw_ >> kAddressBits); }
  constexpr uint64_t address() const { return raw_ & kAddressMask; }
  constexpr bool is_null() const { return raw_ == 0; }

  // True when the pointee lives on `self`, i.e. CPU loads/stores may be used.
  constexpr bool is_local(NodeId self) const { return !is_null() && node() == self; }
  // Same, against the node the calling thread is bound to (see ThisThreadNode).
  bool is_local() const;

  // Pointer arithmetic in bytes. Stays on the same node.
  constexpr RemotePtr operator+(uint64_t bytes) const { return RemotePtr(node(), address() + bytes); }

  // The local virtual address. Only meaningful when is_local(self).
  template <typename T = void>
  T* local() const {
    return reinterpret_cast<T*>(static_cast<uintptr_t>(address()));
  }

  friend constexpr bool operator==(RemotePtr a, RemotePtr b) { return a.raw_ == b.raw_; }
  friend constexpr bool operator!=(RemotePtr a, RemotePtr b) { return a.raw_ != b.raw_; }
  template <typename H>
  friend H AbslHashValue(H h, RemotePtr p) {
    return H::combine(std::move(h), p.raw_);
  }

 private:
  uint64_t raw_ = 0;
};

std::ostream& operator<<(std::ostream& os, RemotePtr p);

// The node the calling thread runs on. Set by rdma::Session (each session binds
// its thread) or explicitly with BindThisThreadToNode. Defaults to 0.
NodeId ThisThreadNode();
void BindThisThreadToNode(NodeId node);

inline bool RemotePtr::is_local() const { return is_local(ThisThreadNode()); }

}  // namespace rdma

#endif  // RDMA_REMOTE_PTR_H_
