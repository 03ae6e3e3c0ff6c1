#ifndef STRUCTURES_SKIPLIST_RDMA_PATH_H_
#define STRUCTURES_SKIPLIST_RDMA_PATH_H_

// The ordered map's RDMA word accessor: the same interface as NativeNodes
// (native_path.h) over the thread's Session, remote or over the loopback QP.
// Only READ and WRITE touch node words (PlainWords); the locks' NIC atomics
// are ALock's business.
//
// Ordering argument:
//  * A reader READs a node's image (version .. checksum) in one READ and
//    accepts it only when the checksum matches (the words of one READ land in
//    no fixed order, on rxe even a word's bytes do): then it is one write's
//    image, current at an instant inside the READ (the hash map's argument,
//    structures/README.md, with the node image as the tuple).
//  * A writer holds the node's lock. It stages WRITEs of version + 1 (marked
//    with its node, OddVersion), its words (the meta word last), the
//    checksum and version + 2 and posts them in one chain (without
//    waiting when all are small enough to go inline; else it waits), then
//    unlocks with ALock's CAS on the node's lock line: the same QP, so the
//    responder executes the WRITEs before the CAS, and the next holder
//    (whose acquire follows that CAS) sees them. Native readers see the odd
//    version land before any word (same-QP order) and the even one after.
//  * A split posts, under the new right node's lock, the left node's write
//    (high lowered, the link) and then the right node's, on the same QP, and
//    unlocks the right node after both: the right node never owns its range
//    while the left node still does, and a reader that follows the new link
//    before the right node's image lands finds it not owning the key and
//    waits for its lock (split.h, search.h).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/staged_writes.h"
#include "structures/skiplist/layout.h"

namespace structures::skiplist_internal {

template <typename V>
class RemoteNodes {
 public:
  using I = NodeImage<V>;
  using L = NodeLayout<V>;

  // `cache` holds three images (the descent's current node and the one it
  // looks at, and a lookup's scratch copy), owned by the caller.
  RemoteNodes(rdma::Session& s, rdma::RemotePtr part, I* cache) : s_(s), part_(part), cache_(cache) {}

  // The descent's image cache (the client fills it with validated copies:
  // each node the descent looks at is read once).
  static constexpr bool kCopiesImages = true;
  const I* Cached(uint64_t idx) const {
    for (int k = 0; k < 2; ++k) {
      if (cached_[k] == idx + 1) return &cache_[k];
    }
    return nullptr;
  }
  // The slot the next cached image goes to (emptied now).
  I* NextSlot() {
    next_slot_ = victim_;
    victim_ ^= 1;
    cached_[next_slot_] = 0;
    return &cache_[next_slot_];
  }
  // The image NextSlot returned now holds node idx.
  void MarkCached(uint64_t idx) { cached_[next_slot_] = idx + 1; }

  template <bool kValidate = true>
  absl::Status Snapshot(uint64_t idx, I* out, bool* valid) {
    if (absl::Status st = s_.Read(ImagePtr(idx), out, sizeof(I)); !st.ok()) return st;
    *valid = !kValidate || out->Valid();
    return absl::OkStatus();
  }
  // A lookup's view, cut from one image READ.
  template <bool kValidate = true>
  absl::Status View(uint64_t idx, uint64_t key, LeafView<V>* out, bool* valid) {
    if (absl::Status st = Snapshot<kValidate>(idx, &cache_[2], valid); !st.ok()) return st;
    *out = LeafView<V>::FromImage(cache_[2], key);
    return absl::OkStatus();
  }
  // Under the lock (when the acquire's chain did not already read it).
  absl::Status SnapshotLocked(uint64_t idx, I* out) { return s_.Read(ImagePtr(idx), out, sizeof(I)); }

  // The meta word (which slots are occupied) goes after every other changed
  // word: a chain cut short by a crash then leaves the node's content as it
  // was (new words only in free slots) or as it is after the write, and the
  // home's repair needs only fix the checksum (RepairAfterDeadWriter).
  void Store(uint64_t idx, const I& img, const Ranges& r) {
    staged_.Stage64(ImagePtr(idx), OddVersion(img.version, s_.self()));
    for (int meta_pass = 0; meta_pass < 2; ++meta_pass) {
      for (size_t k = 0; k < r.n; ++k) {
        const bool has_meta = r.first[k] <= Words<V>::kMeta && Words<V>::kMeta < r.last[k];
        if (has_meta != (meta_pass == 1)) continue;
        staged_.Stage(ImagePtr(idx) + 8 * r.first[k], img.words() + r.first[k], r.last[k] - r.first[k]);
      }
    }
    staged_.Stage64(ImagePtr(idx) + 8 * Words<V>::kChecksum, img.checksum);
    staged_.Stage64(ImagePtr(idx), img.version);
    Forget();
  }
  absl::Status LoadPartWord(uint64_t offset, uint64_t* out) { return s_.Read(part_ + offset, out, 8); }
  void StorePartWord(uint64_t offset, uint64_t v) { staged_.Stage64(part_ + offset, v); }

  // Posts the staged WRITEs in order in one chain (see the top of this file).
  absl::Status Flush() { return staged_.Flush(s_, part_.node()); }
  // Drops the descent's cached images (after this thread wrote).
  void Forget() { cached_[0] = cached_[1] = 0; }

 private:
  rdma::RemotePtr ImagePtr(uint64_t idx) const { return part_ + (L::NodeOffset(idx) + L::kImageOffset); }

  rdma::Session& s_;
  rdma::RemotePtr part_;
  I* cache_;
  uint64_t cached_[2] = {0, 0};  // node index + 1 of cache_[k]; 0 = empty
  int victim_ = 0;
  int next_slot_ = 0;
  StagedWrites staged_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_RDMA_PATH_H_
