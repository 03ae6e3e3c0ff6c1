#ifndef TESTS_STRUCTURES_SKIPLIST_RACE_ENV_H_
#define TESTS_STRUCTURES_SKIPLIST_RACE_ENV_H_

// What the ordered map's race tests share (skiplist_order_race_test,
// skiplist_reader_race_test, skiplist_reclaim_race_test): a soft cluster with
// a map of Wide values (all words one stamp, so a torn copy shows) and its
// clients; the split and reclaim pauses (policy.h's BetweenSplitWrites and
// BetweenUnlinkAndFree hooks); Spy, which watches node 0's soft NIC copy the
// words of each READ and WRITE posted on node 0's QPs; Part, node 0's part
// in memory; and the layouts the tests start from (SplitHeadAt90,
// ThreeNodes).
//
// Soft NIC only: the copy hook (rdma/soft/fault_injector.h) with the WRs
// posted on node 0's QPs tells which READ or WRITE is being copied; tests that
// use it have a single NIC client on a single-node cluster, whose WRs execute
// in post order. Every wait is bounded.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/path.h"
#include "rdma/soft/soft_nic.h"
#include "rdma/work_request.h"
#include "structures/skiplist/skiplist.h"
#include "testing/backends.h"

namespace structures::skiplist_race {

namespace si = skiplist_internal;

// Values whose words are all one stamp: a copy mixing two writes shows.
struct Wide {
  uint64_t w[7];
};
inline Wide Stamp(uint64_t s) {
  Wide v;
  for (uint64_t& x : v.w) x = s;
  return v;
}
inline bool Whole(const Wide& v) {
  for (uint64_t x : v.w) {
    if (x != v.w[0]) return false;
  }
  return true;
}

// The split pause (policy.h's BetweenSplitWrites): armed for one split, which
// announces that it is between its two writes and waits (at most a minute)
// for the release.
inline std::atomic<bool> g_pause_armed{false};
inline absl::Notification* g_in_split = nullptr;
inline absl::Notification* g_split_release = nullptr;

// The reclaim pause (policy.h's BetweenUnlinkAndFree): armed for one reclaim, which announces that it has
// unlinked its node (dead now) and waits (at most a minute) before freeing it.
inline std::atomic<bool> g_free_pause_armed{false};
inline absl::Notification* g_before_free = nullptr;
inline absl::Notification* g_free_release = nullptr;

struct Pausing : si::ShippedChecks {
  static void BetweenSplitWrites() {
    if (!g_pause_armed.exchange(false)) return;
    g_in_split->Notify();
    g_split_release->WaitForNotificationWithTimeout(absl::Seconds(60));
  }
  static void BetweenUnlinkAndFree() {
    if (!g_free_pause_armed.exchange(false)) return;
    g_before_free->Notify();
    g_free_release->WaitForNotificationWithTimeout(absl::Seconds(60));
  }
};

using Map = si::BasicSkipList<Wide, Pausing>;
using Client = Map::Client;
using I = si::NodeImage<Wide>;
using L = si::NodeLayout<Wide>;
using Wd = si::Words<Wide>;

constexpr uint64_t kPool = 64;  // nodes per part, unless a test needs more

// A soft cluster, a map on it and clients. Members are torn down clients
// first, the cluster last.
struct Env {
  std::unique_ptr<rdma::Cluster> cluster;
  std::optional<Map> map;
  std::vector<std::unique_ptr<rdma::Session>> sessions;
  std::vector<std::unique_ptr<Client>> clients;

  ~Env() {
    clients.clear();
    sessions.clear();
    map.reset();
  }
  // A client on `node` without a Session (native paths only), or null.
  Client* Native(rdma::NodeId node = 0) { return Add(node, nullptr); }
  // A client on `node` with its own Session, or null.
  Client* Nic(rdma::NodeId node = 0) {
    auto s = cluster->NewSession(node);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    sessions.push_back(std::move(*s));
    return Add(node, sessions.back().get());
  }

 private:
  Client* Add(rdma::NodeId node, rdma::Session* s) {
    auto c = s != nullptr ? map->NewClient(*s) : map->NewClient(cluster->node(node));
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    clients.push_back(std::move(*c));
    return clients.back().get();
  }
};

inline bool MakeEnv(Env* e, int nodes = 1, std::vector<uint64_t> splits = {}, uint64_t pool = kPool) {
  e->cluster = rdma::testing::MakeCluster("soft", nodes, 16 << 20);
  if (e->cluster == nullptr) return false;
  SkipListOptions o;
  o.split_keys = std::move(splits);
  o.part_bytes = si::kNodesOffset + pool * Map::kNodeBytes;
  auto m = Map::Create(*e->cluster, o);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return false;
  e->map.emplace(std::move(*m));
  return true;
}

inline void Put(Client* c, uint64_t k, Path p = Path::kAuto) {
  auto r = c->Put(k, Stamp(k), p);
  ASSERT_TRUE(r.ok()) << k << ": " << r.status();
}
inline void Erase(Client* c, uint64_t k, Path p = Path::kAuto) {
  auto r = c->Erase(k, p);
  ASSERT_TRUE(r.ok()) << k << ": " << r.status();
  ASSERT_TRUE(r->has_value()) << k << " was not there";
}
// The keys of a scan from 0 (and that every value is its key's stamp).
inline std::vector<uint64_t> Keys(Client* c, Path p = Path::kAuto) {
  std::vector<uint64_t> keys;
  auto r = c->Scan(0, 1000, p);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return keys;
  for (const auto& [k, v] : *r) {
    keys.push_back(k);
    EXPECT_TRUE(Whole(v) && v.w[0] == k) << "key " << k << " has value " << v.w[0];
  }
  return keys;
}
inline std::vector<uint64_t> Range(uint64_t from, uint64_t to, uint64_t step) {  // [from, to]
  std::vector<uint64_t> v;
  for (uint64_t k = from; k <= to; k += step) v.push_back(k);
  return v;
}
inline std::vector<uint64_t> Concat(std::vector<std::vector<uint64_t>> parts) {
  std::vector<uint64_t> v;
  for (auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

// Node 0's soft NIC, watched: for each word it copies, which READ or WRITE
// that word belongs to (the WRs posted on node 0's QPs, in post order), and a
// callback. Only for a single-node cluster with at most one NIC client.
class Spy {
 public:
  struct Transfer {
    rdma::Opcode op = rdma::Opcode::kRead;
    uint64_t addr = 0;
    uint32_t length = 0;
  };
  using OnWord = std::function<void(const Transfer&, uint64_t index)>;

  explicit Spy(rdma::Cluster& c) : dev_(rdma::soft::AsSoftDevice(c.node(0).device())) {
    dev_->SetPostHook([this](const rdma::WorkRequest& wr) {
      if (wr.opcode != rdma::Opcode::kRead && wr.opcode != rdma::Opcode::kWrite) return;
      std::lock_guard<std::mutex> l(mu_);
      posted_.push_back({wr.opcode, wr.remote_addr, wr.length});
    });
    dev_->faults().SetCopyHook([this](uint64_t index) {
      Transfer t;
      OnWord f;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (index == 0 && !posted_.empty()) {
          cur_ = posted_.front();
          posted_.pop_front();
        }
        t = cur_;
        f = on_word_;
      }
      if (f) f(t, index);
    });
  }
  ~Spy() {
    dev_->faults().SetCopyHook(nullptr);
    dev_->SetPostHook(nullptr);
  }
  void Set(OnWord f) {
    std::lock_guard<std::mutex> l(mu_);
    on_word_ = std::move(f);
  }
  static bool IsImageRead(const Transfer& t, uint64_t image) {
    return t.op == rdma::Opcode::kRead && t.addr == image && t.length == sizeof(I);
  }

 private:
  rdma::soft::SoftDevice* dev_;
  std::mutex mu_;
  std::deque<Transfer> posted_;
  Transfer cur_;
  OnWord on_word_;
};

// Node 0's part in memory (read with atomic word loads).
struct Part {
  uint64_t base = 0;
  uint64_t nodes = kPool;

  si::Node<Wide>& At(uint64_t idx) const { return *reinterpret_cast<si::Node<Wide>*>(base + L::NodeOffset(idx)); }
  si::PartHeader& Header() const { return *reinterpret_cast<si::PartHeader*>(base); }
  uint64_t Image(uint64_t idx) const { return base + L::NodeOffset(idx) + L::kImageOffset; }
  I Peek(uint64_t idx) const {
    I img;
    for (size_t i = 0; i < I::kWords; ++i) img.words()[i] = At(idx).words()[i].Load();
    return img;
  }
  // The live node (not the head) whose low is `low`, or 0.
  uint64_t Find(uint64_t low) const {
    for (uint64_t i = 1; i < nodes; ++i) {
      const I img = Peek(i);
      if (img.live() && img.low == low) return i;
    }
    return 0;
  }
  static bool Free(const locks::ALockWord& l) { return l.r_tail.Load() == 0 && l.l_tail.Load() == 0; }
  bool LockFree(uint64_t idx) const { return Free(At(idx).lock); }
  // Whether nobody holds or waits for any lock of the part.
  bool AllLocksFree() const {
    if (!Free(Header().alloc_lock)) return false;
    for (uint64_t i = 0; i < nodes; ++i) {
      if (!LockFree(i)) return false;
    }
    return true;
  }
  // Whether any node links idx at a level above 0.
  bool LinkedAbove(uint64_t idx) const {
    for (uint64_t j = 0; j < nodes; ++j) {
      const I img = Peek(j);
      for (size_t level = 1; level < si::kMaxHeight; ++level) {
        if (img.next[level] == idx) return true;
      }
    }
    return false;
  }

  // What breaks layout.h invariant 4 at any level (and level 0's fences),
  // "" when it holds: from the head, each link leads to a live node tall
  // enough for the level, with a larger low; at level 0 each node's low is
  // its predecessor's high.
  std::string LinkProblems() const {
    for (size_t level = 0; level < si::kMaxHeight; ++level) {
      uint64_t x = 0;
      I xi = Peek(0);
      for (uint64_t steps = 0;; ++steps) {
        const uint64_t n = xi.next[level];
        if (n == 0) break;
        if (steps > nodes || n >= nodes) return absl::StrCat("level ", level, ": a cycle or a link out of the pool");
        const I ni = Peek(n);
        const std::string where = absl::StrCat("level ", level, ": node ", x, " links node ", n);
        if (!ni.live()) return where + ", which is dead";
        if (ni.height() <= level) return absl::StrCat(where, ", of height ", ni.height());
        if (x != 0 && ni.low <= xi.low) return absl::StrCat(where, " (low ", ni.low, " after ", xi.low, ")");
        if (level == 0 && (!xi.bounded() || xi.high != ni.low)) return where + ", which does not start at its high";
        x = n;
        xi = ni;
      }
    }
    return "";
  }
};

// Finds node 0's part: the first image a cold NIC client READs is the head's
// (its descent starts there).
inline Part FindPart(Env& e, Spy& spy, uint64_t pool = kPool) {
  std::atomic<uint64_t> first{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    uint64_t none = 0;
    if (index == 0 && t.op == rdma::Opcode::kRead && t.length == sizeof(I)) first.compare_exchange_strong(none, t.addr);
  });
  Client* c = e.Nic();
  EXPECT_NE(c, nullptr);
  if (c != nullptr) {
    EXPECT_TRUE(c->Get(0, Path::kLoopback).ok());
  }
  spy.Set(nullptr);
  EXPECT_NE(first.load(), 0u) << "no image READ seen";
  return Part{first.load() - L::kImageOffset - si::kNodesOffset, pool};
}

// 10, 20, ..., 160 fill the head; 170 splits it at 90: P (the head) owns
// [0, 90) with 10..80, Q owns [90, end) with 90..170.
inline void SplitHeadAt90(Client* w, Path p = Path::kAuto) {
  for (uint64_t k = 10; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k, p));
  ASSERT_EQ(w->stats().splits, 1u);
}

// Three nodes in one part: 1000..1150 fill the head and 1160 splits it at
// 1080; 2000..2070 fill Q and split it at 1160. P (the head) = [0, 1080) with
// 1000..1070, Q = [1080, 1160) with 1080..1150, R = [1160, end) with 1160 and
// 2000..2070.
inline void ThreeNodes(Client* w) {
  for (uint64_t k = 1000; k <= 1160; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  for (uint64_t k = 2000; k <= 2070; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  ASSERT_EQ(w->stats().splits, 2u);
}

}  // namespace structures::skiplist_race

#endif  // TESTS_STRUCTURES_SKIPLIST_RACE_ENV_H_
