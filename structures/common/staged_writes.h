#ifndef STRUCTURES_COMMON_STAGED_WRITES_H_
#define STRUCTURES_COMMON_STAGED_WRITES_H_

// A NIC-path writer's WRITEs, staged while it holds a lock and posted in one
// chain just before the unlock (docs/design.md §5, §9). Posted on the QP to
// the node that holds the lock, they execute at the responder before the
// unlocking CAS that follows on the same QP, so the next holder sees them.
// When every WRITE is small enough to go inline, the chain is posted without
// waiting (no round trip); otherwise Flush waits for it (a payload must stay
// readable until the NIC has copied it).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"

namespace structures {

class StagedWrites {
 public:
  // Stages a WRITE of `n` words to `dst`.
  void Stage(rdma::RemotePtr dst, const uint64_t* words, size_t n) {
    staged_.push_back({dst, std::vector<uint64_t>(words, words + n)});
  }
  void Stage64(rdma::RemotePtr dst, uint64_t v) { Stage(dst, &v, 1); }
  bool empty() const { return staged_.empty(); }

  // Posts the staged WRITEs, in order, in one chain to `node` (one
  // doorbell), and forgets them.
  absl::Status Flush(rdma::Session& s, rdma::NodeId node) {
    if (staged_.empty()) return absl::OkStatus();
    bool all_inline = true;
    for (const Write& w : staged_) all_inline = all_inline && s.FitsInline(8 * w.words.size());
    absl::Status st;
    {
      rdma::Batch b(s, node);
      for (const Write& w : staged_) b.Write(w.dst, w.words.data(), 8 * w.words.size());
      st = all_inline ? b.PostWithoutWaiting() : b.Execute();
    }
    staged_.clear();
    return st;
  }

 private:
  struct Write {
    rdma::RemotePtr dst;
    std::vector<uint64_t> words;
  };
  std::vector<Write> staged_;
};

}  // namespace structures

#endif  // STRUCTURES_COMMON_STAGED_WRITES_H_
