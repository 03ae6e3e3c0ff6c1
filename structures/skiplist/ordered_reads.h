#ifndef STRUCTURES_SKIPLIST_ORDERED_READS_H_
#define STRUCTURES_SKIPLIST_ORDERED_READS_H_

// OrderedReads: LowerBound and Scan, the reads that walk level 0 in key order
// from a key's owner, on into the next nodes' parts.
//
//   OrderedReads<V, Checks> reads(&nodes, &search, &cache);
//   ASSIGN_OR_RETURN(auto lb, reads.LowerBound(40, Path::kAuto));
//   ASSIGN_OR_RETURN(auto some, reads.Scan(0, 100, Path::kAuto));
//
// LowerBound is linearizable: when its answer comes from a later node than
// the key's owner, it reads the nodes it passed over again and requires their
// versions unchanged, else starts over. Scan is weakly consistent (each pair
// was bound at some instant during the scan, keys strictly ascend, a key
// bound throughout is not missed). A walk that reaches a node whose low is
// not its predecessor's high (reclaimed or reused since the link was read)
// goes on from the owner of that key.
//
// Contract: not thread-safe (one per client). Errors: Scan InvalidArgument
// for limit 0; LowerBound Aborted after 1000 attempts that met writers; the
// transport's; DataLoss for broken links. Costs on the NIC paths: the start
// node's READ, then the remembered nodes after it, READ up to kMaxAhead per
// doorbell (as many as the rest of the scan needs at the last node's fill).
// docs/design.md §9.3.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/path.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/leaf_cache.h"
#include "structures/skiplist/node_access.h"
#include "structures/skiplist/search.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

template <typename V, typename Checks>
class OrderedReads {
  using I = NodeImage<V>;
  using L = NodeLayout<V>;

 public:
  static constexpr int kLowerBoundAttempts = 1000;
  static constexpr size_t kMaxAhead = 8;  // READs a walk chains in one doorbell

  OrderedReads(NodeAccess<V, Checks>* nodes, LeafSearch<V, Checks>* search, LeafCache* cache)
      : n_(*nodes), search_(*search), cache_(*cache) {}

  absl::StatusOr<std::optional<std::pair<uint64_t, V>>> LowerBound(uint64_t key, Path path) {
    for (int attempt = 0; attempt < kLowerBoundAttempts; ++attempt) {
      passed_.clear();
      std::optional<std::pair<uint64_t, V>> found;
      RETURN_IF_ERROR(Walk(key, path, [&](const I& img) {
        const int i = img.LowerBound(key);
        if (i < 0) return true;  // keep going
        found.emplace(img.keys[i], I::DecodeValue(img.values[i]));
        return false;
      }, /*record=*/true, [](const I&) { return size_t{1}; }));
      // The last node read is the answer's (or the end); the ones before it
      // had nothing >= key and must still be as they were.
      bool stable = true;
      for (size_t j = 0; j + 1 < passed_.size() && stable; ++j) {
        I again;
        RETURN_IF_ERROR(n_.ReadNode(passed_[j].route, passed_[j].idx, &again));
        stable = again.version == passed_[j].version;
      }
      if (stable) return found;
      ++n_.stats().lower_bound_retries;
    }
    return absl::AbortedError(absl::StrCat("SkipList LowerBound(", key, "): the nodes it passed over changed in ",
                                           kLowerBoundAttempts, " attempts in a row; try again"));
  }

  absl::StatusOr<std::vector<std::pair<uint64_t, V>>> Scan(uint64_t from, size_t limit, Path path) {
    if (limit == 0) return absl::InvalidArgumentError("SkipList Scan: limit must be at least 1");
    std::vector<std::pair<uint64_t, V>> out;
    uint64_t cursor = from;
    RETURN_IF_ERROR(Walk(from, path, [&](const I& img) {
      std::array<int, kFanout> order;
      size_t n = 0;
      for (size_t i = 0; i < kFanout; ++i) {
        if (img.Occupied(i) && img.keys[i] >= cursor) order[n++] = static_cast<int>(i);
      }
      std::sort(order.begin(), order.begin() + n, [&img](int a, int b) { return img.keys[a] < img.keys[b]; });
      for (size_t j = 0; j < n && out.size() < limit; ++j) {
        out.emplace_back(img.keys[order[j]], I::DecodeValue(img.values[order[j]]));
      }
      if (out.size() >= limit) return false;
      if (n > 0) {
        if (out.back().first == UINT64_MAX) return false;
        cursor = out.back().first + 1;
      }
      return true;
    }, /*record=*/false, [&](const I& last) {
      // The nodes the rest of the scan needs if they hold as many keys as
      // the last one did.
      const size_t per = std::max<size_t>(1, static_cast<size_t>(__builtin_popcount(last.bitmap())));
      return (limit - out.size() + per - 1) / per;
    }));
    return out;
  }

 private:
  struct Passed {
    Route route;
    uint64_t idx;
    uint64_t version;
  };

  // Visits each node from `key`'s owner on in key order, through the next
  // parts, until visit(image) returns false or the last part ends. With
  // `record`, appends (route, idx, version) of each node to passed_.
  // ahead(image just visited): how many nodes the walk expects to need next.
  template <typename Visit, typename Ahead>
  absl::Status Walk(uint64_t key, Path path, Visit&& visit, bool record, Ahead&& ahead) {
    StructureClient& c = n_.common();
    const rdma::NodeId first = n_.HomeOf(key);
    for (rdma::NodeId h = first; h < static_cast<rdma::NodeId>(c.num_nodes()); ++h) {
      Route r;
      RETURN_IF_ERROR(c.RouteTo(h, h == first ? path : PathPastHome(path, h), &r));
      const uint64_t from = h == first ? key : RangeLow(n_.splits(), h);
      uint64_t x;
      RETURN_IF_ERROR(search_.ReadLeaf(r, from, &walk_, &x));
      ahead_idx_.clear();
      ahead_pos_ = 0;
      for (uint64_t hops = 0; hops <= n_.nodes() + 1; ++hops) {
        if (record) passed_.push_back({r, x, walk_.version});
        if (!visit(walk_)) return absl::OkStatus();
        if (!walk_.bounded()) break;  // the part's last node
        const uint64_t low = walk_.high;
        x = walk_.next[0];
        if (x == 0 || !n_.InPool(x)) return n_.Corrupt(r, x, "is past a bounded node's end");
        RETURN_IF_ERROR(NextNode(r, x, low, ahead(walk_), &walk_));
        if (!walk_.live() || walk_.low != low) {
          // x was reclaimed (and maybe reused) since the link was read.
          RETURN_IF_ERROR(search_.ReadLeaf(r, low, &walk_, &x));
        }
        search_.Remember(r, x, walk_);
      }
    }
    return absl::OkStatus();
  }

  // The path a walk takes in node h's part, past its first part: a NIC path
  // stays on the NIC (loopback for this node's part); native becomes auto.
  Path PathPastHome(Path path, rdma::NodeId h) const {
    if (h != n_.common().node().id()) return Path::kAuto;
    return path == Path::kLoopback || path == Path::kRemote ? Path::kLoopback : Path::kAuto;
  }

  // A validated copy of node x, the next one of a walk (its low is `low`).
  // On the NIC paths, when the walk expects to need `ahead` > 1 more nodes,
  // x and the remembered nodes after it are READ in one doorbell (one QP:
  // executed in order, as separate reads would be); later calls take those
  // copies while they continue the chain (checksum-valid, live, with the
  // low its predecessor's high).
  absl::Status NextNode(const Route& r, uint64_t x, uint64_t low, size_t ahead, I* out) {
    if (ahead_pos_ < ahead_idx_.size() && ahead_idx_[ahead_pos_] == x && Continues(ahead_[ahead_pos_++], low, out)) {
      return absl::OkStatus();
    }
    ahead_idx_.clear();
    ahead_pos_ = 0;
    if (r.native() || ahead <= 1) return n_.ReadNode(r, x, out);
    ahead_idx_.push_back(x);
    cache_.AppendAfter(r.home, low, std::min<size_t>(ahead, kMaxAhead), n_.nodes(), &ahead_idx_);
    ahead_.resize(ahead_idx_.size());
    {
      rdma::Batch b(*n_.common().session(), r.home);
      for (size_t k = 0; k < ahead_idx_.size(); ++k) {
        b.Read(n_.NodePtr(r, ahead_idx_[k]) + L::kImageOffset, &ahead_[k], sizeof(I));
      }
      RETURN_IF_ERROR(b.Execute());
    }
    ahead_pos_ = 1;
    if (Continues(ahead_[0], low, out)) return absl::OkStatus();
    return n_.ReadNode(r, x, out);  // torn: the read loop with its lock fallback
  }
  // A copy read ahead continues the chain when it is whole, live and starts
  // where its predecessor ends; then it is the walk's next copy.
  static bool Continues(const I& img, uint64_t low, I* out) {
    if (!img.Valid() || !img.live() || img.low != low) return false;
    *out = img;
    return true;
  }

  NodeAccess<V, Checks>& n_;
  LeafSearch<V, Checks>& search_;
  LeafCache& cache_;
  I walk_{};
  std::vector<I> ahead_;             // NextNode's copies READ ahead
  std::vector<uint64_t> ahead_idx_;  // ... and their node indices
  size_t ahead_pos_ = 0;
  std::vector<Passed> passed_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_ORDERED_READS_H_
