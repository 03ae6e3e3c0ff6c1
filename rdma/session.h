#ifndef RDMA_SESSION_H_
#define RDMA_SESSION_H_

// Session and Batch: one thread's one-sided access to every node's arena
// (docs/design.md §5).
//
//   auto s = cluster->NewSession(/*self=*/0);  // or Session::Create(node, connector)
//   absl::StatusOr<uint64_t> v = (*s)->Read64(p);  // one WR, doorbell, round trip
//   uint64_t old = 0;
//   rdma::Batch b(**s, lock.node());
//   b.CompareAndSwap(lock, 0, 1, &old).Read(data, buf, 64);
//   absl::Status st = b.Execute();             // one doorbell, one round trip
//
// Contract:
//  * Not thread-safe: one Session per thread, one open Batch per Session.
//    Creating a Session binds the calling thread to its node (ThisThreadNode).
//  * Errors are absl::Status, never hangs: every completion wait has a
//    deadline (SessionOptions::completion_timeout). After a failed WR or a
//    timeout the QP to that node is in error, and operations to that node
//    fail with FailedPrecondition until Reconnect. A peer the Connector
//    knows is dead (Connector::PeerStatus) gives its Unavailable instead,
//    within SessionOptions::liveness_check of the connector learning it.
//  * A session reaches the processes it connected to: once a node rejoins
//    as a new process (Connector::Incarnation changes), its operations to
//    that node, and Reconnect, return Unavailable; a new Session reaches it.
//    So no address a session resolved lands in another process's memory.
//  * Order: all of a session's WRs to one node go on one RC QP and execute in
//    posting order; WRs to different nodes are unordered. Words of one
//    READ/WRITE land in no fixed order (docs/design.md §3).
//  * Costs: every call updates ThisThreadCounters() (docs/design.md §8).
//  * The Session owns its CQ, QPs and scratch buffer; destroy it before the
//    Node and Connector it was created with.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rdma/device.h"
#include "rdma/node.h"
#include "rdma/op_counters.h"
#include "rdma/remote_ptr.h"

namespace rdma {

struct SessionOptions {
  PollMode poll_mode = PollMode::kBusy;
  // Longest wait for one completion before the op fails with DeadlineExceeded.
  // The QP is then broken: it is reset (its queued work requests never run,
  // so no late READ or atomic result lands in the scratch buffer a later
  // operation uses), and operations to that node fail with
  // FailedPrecondition until Session::Reconnect. Never an unbounded hang.
  std::chrono::nanoseconds completion_timeout = std::chrono::seconds(10);
  // While it waits for a completion, how often the session asks the
  // Connector whether the peer is still alive (Connector::PeerStatus). A dead
  // peer's operations fail with its Unavailable within this much of the
  // connector learning of the death; the QP is then reset as after a timeout.
  std::chrono::nanoseconds liveness_check = std::chrono::milliseconds(100);
  // Registered bounce buffer for READ results and non-inline WRITE payloads.
  size_t scratch_bytes = size_t{1} << 20;
  uint32_t max_send_wr = 256;
};

class Session;

// One READ to chain into another operation's doorbell (e.g. a lock acquire's,
// locks::ALockClient::LockAndRead): `len` bytes from `src` to `dst`.
struct ChainedRead {
  RemotePtr src;
  void* dst = nullptr;
  size_t len = 0;
};

// A chain of work requests to one node, posted on the session's RC QP to that
// node (docs/design.md §5). Contract:
//  * One doorbell per Execute or PostWithoutWaiting; only the last WR is
//    signaled. A failing WR still completes with its error, the QP enters the
//    error state, and the WRs after it complete as flushed.
//  * The responder executes the chain in order, after every earlier chain this
//    session posted to that node: a later READ or atomic sees an earlier WRITE
//    or atomic with no fence (ALock's {CAS, READ}, the hash map's WRITE then
//    unlocking CAS).
//  * WRITEs up to the QP's inline limit (the device's, capped at 64 bytes) go
//    inline; every WRITE payload is staged when added, so the caller's buffer
//    may be reused at once. Read/CAS/FAA results reach the caller's pointers
//    only when Execute returns OK.
//  * A building error (pointer off the target node or outside its arena,
//    scratch or send queue too small) is sticky: Execute/PostWithoutWaiting
//    return it. One open Batch per Session.
class Batch {
 public:
  Batch(Session& session, NodeId target);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  Batch& Read(RemotePtr src, void* dst, size_t len);
  Batch& Write(RemotePtr dst, const void* src, size_t len);
  Batch& Write64(RemotePtr dst, uint64_t value) { return Write(dst, &value, sizeof value); }
  Batch& CompareAndSwap(RemotePtr word, uint64_t expected, uint64_t desired, uint64_t* old_out);
  Batch& FetchAndAdd(RemotePtr word, uint64_t add, uint64_t* old_out);
  // Sets IBV_SEND_FENCE on the next WR added: it starts only after every
  // earlier READ and atomic on this QP completed. Needed only where a later WR
  // must not overtake an earlier READ/atomic. The library posts none: a fenced
  // READ or atomic can stall rxe forever (docs/design.md §5, §6.2).
  Batch& Fence();

  size_t size() const { return wrs_.size(); }

  // Posts the chain (one doorbell) and waits for the last WR (one round trip).
  // On error, says which WR failed; the QP is then in error (Reconnect).
  absl::Status Execute();
  // Posts the chain (one doorbell) and returns without waiting (no round
  // trip counted). Inline WRITEs only, else InvalidArgument and nothing posted.
  // They execute before anything posted later to the same node; an error
  // surfaces at the session's next wait or post on that node, or in Drain
  // (docs/design.md §5).
  absl::Status PostWithoutWaiting();

 private:
  friend class Session;

  struct Copyback {
    void* dst;
    size_t scratch_offset;
    size_t len;
  };
  absl::Status Prepare(size_t len, size_t* scratch_offset);
  absl::StatusOr<uint32_t> RemoteKey(RemotePtr p, size_t len);

  Session& session_;
  NodeId target_;
  // Inline capacity covers every chain the library posts, so building and
  // posting a Batch allocates nothing on the heap.
  absl::InlinedVector<WorkRequest, 8> wrs_;
  absl::InlinedVector<Copyback, 8> copybacks_;
  size_t scratch_used_ = 0;
  bool fence_next_ = false;
  bool owns_session_ = false;
  absl::Status error_;  // first error from building the chain
};

// One thread's handle on the cluster: a CQ, one RC QP to every node (the QP to
// its own node is the loopback QP), and a registered scratch buffer. All
// one-sided verbs go through here, and every call updates the calling
// thread's OpCounters. Not thread-safe: one Session per thread. Creating a
// session binds the calling thread to `self` (see ThisThreadNode).
class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(Node& self, Connector& peers,
                                                         const SessionOptions& options = {});
  ~Session();

  NodeId self() const { return self_.id(); }
  // The node this session's thread lives on (hosted by this process).
  Node& node() const { return self_; }
  int num_nodes() const { return static_cast<int>(qps_.size()); }
  const SessionOptions& options() const { return options_; }

  // Single verbs: one WR, one doorbell, one round trip each (a one-WR Batch).
  //
  // Read/Write (docs/design.md §3, §5): each aligned 8-byte word is copied
  // whole on real RNICs and the soft NIC's default mode, NOT on rxe (or the
  // soft NIC's byte_granular_copies mode), where a word can tear against CPU
  // accesses. The words of one transfer land in no fixed order, so a
  // multi-word READ racing a writer can mix old and new words: validate
  // (checksums, versions) rather than assume a snapshot.
  absl::Status Read(RemotePtr src, void* dst, size_t len);
  absl::Status Write(RemotePtr dst, const void* src, size_t len);
  // One aligned 8-byte word: whole per the contract above, except on rxe.
  absl::StatusOr<uint64_t> Read64(RemotePtr src);
  absl::Status Write64(RemotePtr dst, uint64_t value);
  // NIC-domain atomics; return the old value. `word` must be 8-byte aligned.
  // Atomic only among NIC atomics on the target's device, not with CPU atomics
  // on the same word (docs/design.md §3): use them on NicWord fields only,
  // through rdma::RemoteRef<T>::Field (rdma/remote_ref.h).
  absl::StatusOr<uint64_t> CompareAndSwap(RemotePtr word, uint64_t expected, uint64_t desired);
  absl::StatusOr<uint64_t> FetchAndAdd(RemotePtr word, uint64_t add);

  // Waits until every WR posted so far (to any node) has completed.
  absl::Status Drain();
  // Resets the QP to `node` and connects it again (after an error). If that
  // fails, the session keeps no QP to `node`: every later op to it fails
  // with FailedPrecondition naming this error, until a Reconnect succeeds.
  absl::Status Reconnect(NodeId node);
  // True once an operation to `node` failed (an error completion, a
  // timeout, a dead peer's abandoned QP) and no Reconnect has succeeded
  // since, or the session has no QP to it. One field read.
  bool broken(NodeId node) const { return qps_[node].broken || !qps_[node].qp; }
  // What a client that outlives one failed operation calls before its next:
  // when the QP to `node` is broken, its peer alive and the same process
  // (Connector::PeerStatus, Incarnation), and no error is still waiting to
  // be reported (a PostWithoutWaiting chain's), Reconnect; else nothing.
  // OK when nothing was to be done; the peer's Unavailable, or Reconnect's
  // error, otherwise.
  absl::Status Repair(NodeId node);
  // The QP to `node` (node < num_nodes()). After a failed Reconnect this is a
  // stand-in whose Post fails with FailedPrecondition and whose state is
  // kError, so callers never touch a missing QP.
  QueuePair& queue_pair(NodeId node);
  // Where `node`'s registered arena lives, as learned from the Connector when
  // this session was created (lets structures place data at deterministic
  // offsets in every node's arena across processes). node < num_nodes().
  const ArenaInfo& arena(NodeId node) const { return qps_[node].arena; }
  // Diagnostics: where a local virtual address lies ("node 1's arena +0x40",
  // "this session's scratch buffer +0x0", or "none of ..."), for error
  // messages about corrupted pointers.
  std::string DescribeAddress(uint64_t address) const;
  // True when a WRITE of `len` bytes goes inline (its payload copied into
  // the WR at post time), which is what Batch::PostWithoutWaiting needs.
  bool FitsInline(size_t len) const { return len <= max_inline_; }
  // True when [p, p+len) lies in p.node()'s registered arena (no NIC op).
  bool InArena(RemotePtr p, size_t len) const {
    if (p.node() >= qps_.size()) return false;
    const ArenaInfo& a = qps_[p.node()].arena;
    return p.address() >= a.base && len <= a.length && p.address() - a.base <= a.length - len;
  }

 private:
  friend class Batch;
  Session(Node& self, Connector& peers, const SessionOptions& options);
  absl::Status ConnectTo(NodeId node);
  absl::StatusOr<uint32_t> RkeyFor(RemotePtr p, size_t len) const;
  absl::Status Post(NodeId target, absl::Span<WorkRequest> wrs, bool wait);
  absl::Status WaitFor(NodeId target, uint64_t wr_id);
  // Books one completion against the peer whose QP it came from: its error
  // goes to *target_error when that peer is `target`, else to the peer's
  // deferred_error; its WR id advances last_completed and frees send-queue
  // room. Completions of no current QP (an old, reset one) are dropped.
  void Account(const Completion& c, NodeId target, absl::Status* target_error);
  absl::Status NotConnectedError(NodeId node) const;
  // `error`, or the connector's Unavailable when `target` is known dead.
  absl::Status PeerError(NodeId target, absl::Status error) const;
  // The connector's PeerStatus, or Unavailable when `target` is another
  // process now than the one this session connected to.
  absl::Status PeerAlive(NodeId target) const;
  void ReleaseResponder(NodeId node);

  struct PeerQp {
    std::unique_ptr<QueuePair> qp;  // null only after a failed Reconnect
    absl::Status connect_error;      // why qp is null
    std::unique_ptr<QueuePair> stand_in;  // what queue_pair() returns then
    // The peer's responder end of qp, released (Connector::Disconnect) when
    // this session reconnects or closes, so the peer does not accumulate them.
    QpEndpoint responder;
    ArenaInfo arena;
    uint64_t incarnation = 0;     // the peer's process this session reaches (Connector::Incarnation)
    uint64_t last_posted = 0;     // wr_id of the last signaled WR posted
    uint64_t last_completed = 0;  // wr_id of the last signaled WR reaped
    std::deque<std::pair<uint64_t, size_t>> inflight;  // (signaled wr_id, WRs in chain)
    size_t inflight_wrs = 0;
    absl::Status deferred_error;  // from a PostWithoutWaiting chain
    bool broken = false;          // an operation failed since the last connect (broken())
    // Signaled wr_id of the last chain holding a fenced READ or atomic (0 =
    // none): names the likely culprit when that chain never completes.
    uint64_t fenced_rd_atomic = 0;
  };
  // Resets `p`'s QP and forgets its work in flight: it never completes.
  void AbandonQp(PeerQp& p);

  Node& self_;
  Connector& peers_;
  SessionOptions options_;
  std::unique_ptr<CompletionQueue> cq_;
  std::vector<char> scratch_storage_;
  std::unique_ptr<MemoryRegion> scratch_mr_;
  std::vector<PeerQp> qps_;
  uint64_t next_wr_id_ = 1;
  uint32_t max_inline_ = 0;  // WRITEs up to this size go inline
  bool batch_open_ = false;
};

}  // namespace rdma

#endif  // RDMA_SESSION_H_
