#ifndef RDMA_REMOTE_REF_H_
#define RDMA_REMOTE_REF_H_

// RemoteRef<T>: a RemotePtr known to point at a T in some node's registered
// memory. The typed way to read, write and RMW remote memory, so a remote read
// is one line and the RMW domain of a word comes from its declaration
// (docs/design.md §3):
//
//   struct alignas(64) Line { NicWord tail; CpuWord owner; PlainWord value; };
//   static_assert(offsetof(Line, owner) == 8);  // layouts pin their offsets
//
//   auto line = rdma::RemoteRef<Line>::At(p);        // p: 64-aligned, or abort
//   auto old = line.Field(&Line::tail).CompareAndSwap(s, 0, me);  // NicWord: NIC CAS ok
//   uint64_t v = *line.Field(&Line::value).Read(s);    // any word: one READ
//   line.Field(&Line::owner).CompareAndSwap(s, 0, me);             // CpuWord: no NIC RMW,
//                                                       // does not compile
//   Line copy;  line.ReadInto(s, &copy);                // the whole line at once
//
// Every method is one work request. The blocking ones cost one doorbell and
// one round trip; the *In ones add a WR to a caller's Batch (same target node)
// so several go out with one doorbell. They work on the remote and the
// loopback path alike: the Session picks the QP by the pointer's node.
//
// Word handles exist only as fields (or array elements) of a struct: At()
// refuses RMW word types, so no caller can name a domain for an offset.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/remote_ptr.h"
#include "rdma/rmw_word.h"
#include "rdma/session.h"

namespace rdma {

namespace remote_ref_internal {
// The byte offset of `member` within T, from the member pointer (no object of
// T is constructed; only the address of the member inside storage for one is
// taken). T must be standard layout, so this equals offsetof.
template <typename T, typename M>
uint64_t OffsetOf(M T::*member) {
  static_assert(std::is_standard_layout_v<T>, "RemoteRef::Field needs a standard-layout struct");
  union Probe {
    Probe() {}
    ~Probe() {}
    char none;
    T object;
  } probe;
  return static_cast<uint64_t>(reinterpret_cast<const char*>(&(probe.object.*member)) -
                               reinterpret_cast<const char*>(&probe.object));
}
}  // namespace remote_ref_internal

template <typename T>
class RemoteRef {
 public:
  using Type = T;

  constexpr RemoteRef() = default;  // null

  // The T at `p`. `p` must be non-null and alignof(T)-aligned: a violation is
  // a bug in the caller, so it aborts with a message in every build (use
  // Checked for untrusted input). Not for RMW words: a word is reached through
  // the field of the struct that declares it (Field), so its domain is the
  // declared one.
  static RemoteRef At(RemotePtr p)
    requires(!RmwWord<T>)
  {
    if (p.is_null() || p.address() % alignof(T) != 0) {
      ABSL_RAW_LOG(FATAL, "RemoteRef::At: %d:0x%llx is null or not %zu-byte aligned", int{p.node()},
                   static_cast<unsigned long long>(p.address()), alignof(T));
    }
    return RemoteRef(p);
  }
  // As At, but InvalidArgument instead of aborting.
  static absl::StatusOr<RemoteRef> Checked(RemotePtr p)
    requires(!RmwWord<T>)
  {
    if (p.is_null() || p.address() % alignof(T) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("remote pointer ", p.node(), ":0x", absl::Hex(p.address()),
                                                     " is null or not ", alignof(T), "-byte aligned"));
    }
    return RemoteRef(p);
  }

  constexpr RemotePtr ptr() const { return ptr_; }
  constexpr NodeId node() const { return ptr_.node(); }
  constexpr bool is_null() const { return ptr_.is_null(); }
  friend constexpr bool operator==(RemoteRef a, RemoteRef b) { return a.ptr_ == b.ptr_; }

  // The handle of one member of the pointee. Its type, and so what it can do,
  // is the member's declared type.
  template <typename M, typename U = T>
    requires(std::is_same_v<U, T> && std::is_class_v<U>)
  RemoteRef<M> Field(M U::*member) const {
    return RemoteRef<M>(ptr_ + remote_ref_internal::OffsetOf(member));
  }
  // Element `i` of an array pointee (T = E[N]); aborts when i >= N.
  auto operator[](size_t i) const
    requires(std::is_bounded_array_v<T>)
  {
    using E = std::remove_extent_t<T>;
    if (i >= std::extent_v<T>) {
      ABSL_RAW_LOG(FATAL, "RemoteRef: index %zu out of bounds [0, %zu)", i, std::extent_v<T>);
    }
    return RemoteRef<E>(ptr_ + i * sizeof(E));
  }

  // The pointee itself, for CPU access by a thread on its node `self`. Aborts
  // when the pointee is on another node (its address means nothing here).
  T& Local(NodeId self) const {
    if (!ptr_.is_local(self)) {
      ABSL_RAW_LOG(FATAL, "RemoteRef::Local on node %d for an object of node %d", int{self}, int{ptr_.node()});
    }
    return *ptr_.local<T>();
  }

  // --- Whole-object copies (one READ or WRITE of sizeof(T) bytes). Each
  // aligned 8-byte word is copied whole, in no particular order relative to
  // the others (docs/design.md §5): a copy taken while writers run may mix
  // old and new words, which the structure's validation detects.
  absl::Status ReadInto(Session& s, T* out) const
    requires(!RmwWord<T>)
  {
    return s.Read(ptr_, out, sizeof(T));
  }
  void ReadIn(Batch& b, T* out) const
    requires(!RmwWord<T>)
  {
    b.Read(ptr_, out, sizeof(T));
  }
  absl::StatusOr<T> Read(Session& s) const
    requires(!RmwWord<T> && std::is_trivially_copyable_v<T>)
  {
    T out;
    if (absl::Status st = s.Read(ptr_, &out, sizeof(T)); !st.ok()) return st;
    return out;
  }
  absl::Status Write(Session& s, const T& value) const
    requires(!RmwWord<T> && std::is_trivially_copyable_v<T>)
  {
    return s.Write(ptr_, &value, sizeof(T));
  }

  // --- Words of any domain: RDMA READ and plain RDMA WRITE of the 8 bytes.
  absl::StatusOr<uint64_t> Read(Session& s) const
    requires RmwWord<T>
  {
    return s.Read64(ptr_);
  }
  absl::Status Write(Session& s, uint64_t v) const
    requires RmwWord<T>
  {
    return s.Write64(ptr_, v);
  }
  void ReadIn(Batch& b, uint64_t* out) const
    requires RmwWord<T>
  {
    b.Read(ptr_, out, 8);
  }
  void WriteIn(Batch& b, uint64_t v) const
    requires RmwWord<T>
  {
    b.Write64(ptr_, v);
  }

  // --- NIC-domain words only: NIC atomics. Each returns the old value.
  absl::StatusOr<uint64_t> CompareAndSwap(Session& s, uint64_t expected, uint64_t desired) const
    requires(RmwWord<T> && T::kDomain == RmwDomain::kNic)
  {
    return s.CompareAndSwap(ptr_, expected, desired);
  }
  absl::StatusOr<uint64_t> FetchAndAdd(Session& s, uint64_t delta) const
    requires(RmwWord<T> && T::kDomain == RmwDomain::kNic)
  {
    return s.FetchAndAdd(ptr_, delta);
  }
  // Verbs has no swap: a CAS loop starting from `guess` (the caller's best
  // guess of the current value; 0 for an empty queue tail). One NIC op and one
  // round trip when the guess is right, one more per miss. `attempts`, if
  // given, receives the number of CAS operations issued.
  absl::StatusOr<uint64_t> Swap(Session& s, uint64_t desired, uint64_t guess = 0, int* attempts = nullptr) const
    requires(RmwWord<T> && T::kDomain == RmwDomain::kNic)
  {
    int n = 0;
    for (;;) {
      ++n;
      absl::StatusOr<uint64_t> old = CompareAndSwap(s, guess, desired);
      if (!old.ok() || *old == guess) {
        if (attempts != nullptr) *attempts = n;
        return old;
      }
      guess = *old;
    }
  }
  void CompareAndSwapIn(Batch& b, uint64_t expected, uint64_t desired, uint64_t* old) const
    requires(RmwWord<T> && T::kDomain == RmwDomain::kNic)
  {
    b.CompareAndSwap(ptr_, expected, desired, old);
  }
  void FetchAndAddIn(Batch& b, uint64_t delta, uint64_t* old) const
    requires(RmwWord<T> && T::kDomain == RmwDomain::kNic)
  {
    b.FetchAndAdd(ptr_, delta, old);
  }

 private:
  template <typename U>
  friend class RemoteRef;
  constexpr explicit RemoteRef(RemotePtr p) : ptr_(p) {}

  RemotePtr ptr_;
};

// The handle of an RMW word: always obtained from a field (RemoteRef::Field).
template <RmwWord W>
using RemoteWord = RemoteRef<W>;

}  // namespace rdma

#endif  // RDMA_REMOTE_REF_H_
