// Races of the ordered map that stress and lincheck runs reach only by
// chance, each made to happen here, deterministically where a hook allows:
//
//  * LowerBound against inserts that land just before its answer, in a fixed
//    order: a writer inserts a, then b (k <= a < b), erases b, then a, so b
//    is never bound without a, and LowerBound(k) must never answer b. At full
//    speed (no pause between operations) for native and NIC readers against
//    native and NIC writers, within a part and across parts; and once made
//    to happen: both inserts land between the NIC reader's READ of the node
//    holding a's place and its READ of the next node; and a node it passed
//    over reclaimed and reused, its version brought back to the one read.
//  * Ordered reads during a split paused between its two writes (the
//    BetweenSplitWrites hook of structures/skiplist/policy.h), the new right
//    node a reused one with the same low fence as in its earlier life.
//  * A Scan whose next node is reclaimed and reused elsewhere between its
//    READ of the node before it and its own READ; and a Scan whose read-ahead
//    copy is torn by a write.
//  * Native readers against writers at full speed, and inside a NIC writer's
//    WRITE chain (made to pause there by the soft NIC's copy hook).
//  * Writers and readers starting from remembered locations that have gone
//    stale: a node reclaimed, reused higher up, or split since.
//  * A reclaimer whose emptied node is refilled, or whose predecessor splits
//    or is reclaimed, between its descent and its locks (the copy hook,
//    during its READs; the BetweenUnlinkAndFree hook).
//  * Tower links racing a reclaim and a split.
//  * Corrupt nodes and free lists, which the checks under the locks report
//    as DataLoss.
//
// Soft NIC only: the copy hook (rdma/soft/fault_injector.h) with the WRs
// posted on node 0's QPs tells which READ or WRITE is being copied; tests that
// use it have a single NIC client on a single-node cluster, whose WRs execute
// in post order. Every wait is bounded.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

namespace structures {
namespace {

namespace si = skiplist_internal;

// Values whose words are all one stamp: a copy mixing two writes shows.
struct Wide {
  uint64_t w[7];
};
Wide Stamp(uint64_t s) {
  Wide v;
  for (uint64_t& x : v.w) x = s;
  return v;
}
bool Whole(const Wide& v) {
  for (uint64_t x : v.w) {
    if (x != v.w[0]) return false;
  }
  return true;
}

// The split pause (policy.h's BetweenSplitWrites): armed for one split, which
// announces that it is between its two writes and waits (at most a minute)
// for the release.
std::atomic<bool> g_pause_armed{false};
absl::Notification* g_in_split = nullptr;
absl::Notification* g_split_release = nullptr;

// The reclaim pause (policy.h's BetweenUnlinkAndFree): armed for one reclaim, which announces that it has
// unlinked its node (dead now) and waits (at most a minute) before freeing it.
std::atomic<bool> g_free_pause_armed{false};
absl::Notification* g_before_free = nullptr;
absl::Notification* g_free_release = nullptr;

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
    auto c = map->NewClient(cluster->node(node), s);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    clients.push_back(std::move(*c));
    return clients.back().get();
  }
};

bool MakeEnv(Env* e, int nodes = 1, std::vector<uint64_t> splits = {}, uint64_t pool = kPool) {
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

void Put(Client* c, uint64_t k, Path p = Path::kAuto) {
  auto r = c->Put(k, Stamp(k), p);
  ASSERT_TRUE(r.ok()) << k << ": " << r.status();
}
void Erase(Client* c, uint64_t k, Path p = Path::kAuto) {
  auto r = c->Erase(k, p);
  ASSERT_TRUE(r.ok()) << k << ": " << r.status();
  ASSERT_TRUE(r->has_value()) << k << " was not there";
}
// The keys of a scan from 0 (and that every value is its key's stamp).
std::vector<uint64_t> Keys(Client* c, Path p = Path::kAuto) {
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
std::vector<uint64_t> Range(uint64_t from, uint64_t to, uint64_t step) {  // [from, to]
  std::vector<uint64_t> v;
  for (uint64_t k = from; k <= to; k += step) v.push_back(k);
  return v;
}
std::vector<uint64_t> Concat(std::vector<std::vector<uint64_t>> parts) {
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
Part FindPart(Env& e, Spy& spy, uint64_t pool = kPool) {
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
void SplitHeadAt90(Client* w, Path p = Path::kAuto) {
  for (uint64_t k = 10; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k, p));
  ASSERT_EQ(w->stats().splits, 1u);
}

// Three nodes in one part: 1000..1150 fill the head and 1160 splits it at
// 1080; 2000..2070 fill Q and split it at 1160. P (the head) = [0, 1080) with
// 1000..1070, Q = [1080, 1160) with 1080..1150, R = [1160, end) with 1160 and
// 2000..2070.
void ThreeNodes(Client* w) {
  for (uint64_t k = 1000; k <= 1160; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  for (uint64_t k = 2000; k <= 2070; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  ASSERT_EQ(w->stats().splits, 2u);
}

// ---------------------------------------------------------------------------
// LowerBound against inserts in a fixed order just before its answer, at full
// speed.

struct OrderCase {
  std::string name;
  int nodes;                  // 1: all keys in node 0's part; 2: split at 1000
  rdma::NodeId reader_node;
  Path reader_path;
  rdma::NodeId writer_node;
  Path writer_path;
};

class LowerBoundOrderTest : public ::testing::TestWithParam<OrderCase> {};

// k <= a < b < c. One part: P = [0, 90) holds 10..80, Q = [90, end) holds c;
// a lands in P, b in Q. Two parts: node 0's part holds 900..980 and a, node
// 1's holds b and c. The writer inserts a, b, erases b, a, in a loop; the
// reader's LowerBound(k) must be a or c, never b (b is never bound without
// a), and never nothing (c is bound throughout).
TEST_P(LowerBoundOrderTest, NeverAnswersALaterKeyWithoutTheEarlierOne) {
  const OrderCase& oc = GetParam();
  Env e;
  ASSERT_TRUE(MakeEnv(&e, oc.nodes, oc.nodes == 1 ? std::vector<uint64_t>{} : std::vector<uint64_t>{1000}));
  Client* setup = e.Nic(0);
  Client* reader = e.Nic(oc.reader_node);
  Client* writer = e.Nic(oc.writer_node);
  ASSERT_TRUE(setup && reader && writer);
  uint64_t k, a, b, c;
  if (oc.nodes == 1) {
    ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(setup));
    for (uint64_t x = 90; x <= 160; x += 10) ASSERT_NO_FATAL_FAILURE(Erase(setup, x));
    k = 85, a = 86, b = 95, c = 170;
  } else {
    for (uint64_t x = 900; x <= 980; x += 10) ASSERT_NO_FATAL_FAILURE(Put(setup, x));
    k = 985, a = 990, b = 1005, c = 1500;
    ASSERT_NO_FATAL_FAILURE(Put(setup, c));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_failure;  // guarded by mu
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    if (failures.fetch_add(1) == 0) first_failure = what;
    stop = true;
  };
  uint64_t cycles = 0, lookups = 0, saw_a = 0, saw_c = 0;
  std::thread wt([&] {
    while (!stop.load()) {
      auto i1 = writer->Insert(a, Stamp(a), oc.writer_path);
      auto i2 = writer->Insert(b, Stamp(b), oc.writer_path);
      auto e2 = writer->Erase(b, oc.writer_path);
      auto e1 = writer->Erase(a, oc.writer_path);
      if (!i1.ok() || !i2.ok() || !e2.ok() || !e1.ok() || !*i1 || !*i2 || !e2->has_value() || !e1->has_value()) {
        return fail(absl::StrCat("writer: ", i1.status().ToString(), " ", i2.status().ToString(), " ",
                                 e2.status().ToString(), " ", e1.status().ToString()));
      }
      ++cycles;
    }
  });
  std::thread rt([&] {
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
    while (!stop.load() && (elapsed() < std::chrono::milliseconds(1500) || lookups < 500) &&
           elapsed() < std::chrono::seconds(30)) {
      auto r = reader->LowerBound(k, oc.reader_path);
      if (!r.ok()) return fail(r.status().ToString());
      ++lookups;
      if (!r->has_value()) return fail(absl::StrCat("LowerBound(", k, ") found nothing; ", c, " is bound throughout"));
      const uint64_t got = (*r)->first;
      if (!Whole((*r)->second) || (*r)->second.w[0] != got) return fail(absl::StrCat("key ", got, ": a torn value"));
      if (got == a) {
        ++saw_a;
      } else if (got == c) {
        ++saw_c;
      } else {
        return fail(absl::StrCat("LowerBound(", k, ") = ", got, (got == b ? " (bound only while " : " ("),
                                 got == b ? absl::StrCat(a, " was)") : "never bound)"));
      }
    }
  });
  rt.join();
  stop = true;
  wt.join();
  std::printf("%s: %llu lookups (%llu = %llu, %llu = %llu), %llu write cycles, %llu retries\n", oc.name.c_str(),
              (unsigned long long)lookups, (unsigned long long)a, (unsigned long long)saw_a, (unsigned long long)c,
              (unsigned long long)saw_c, (unsigned long long)cycles,
              (unsigned long long)reader->stats().lower_bound_retries);
  ASSERT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(cycles, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, LowerBoundOrderTest,
    ::testing::Values(OrderCase{"native_reader_native_writer", 1, 0, Path::kNative, 0, Path::kNative},
                      OrderCase{"native_reader_nic_writer", 1, 0, Path::kNative, 0, Path::kLoopback},
                      OrderCase{"nic_reader_native_writer", 1, 0, Path::kLoopback, 0, Path::kNative},
                      OrderCase{"nic_reader_nic_writer", 1, 0, Path::kLoopback, 0, Path::kLoopback},
                      // a native and b remote for both; then a remote and b native for the reader.
                      OrderCase{"across_parts_native_first", 2, 0, Path::kAuto, 0, Path::kAuto},
                      OrderCase{"across_parts_remote_first", 2, 1, Path::kAuto, 0, Path::kAuto}),
    [](const ::testing::TestParamInfo<OrderCase>& p) { return p.param.name; });

// The same race made to happen: both inserts land right after the NIC
// reader's READ of P (the node a goes to), before its READ of Q (where b
// goes). The reader must read P again (its version changed) and answer a.
TEST(SkipListRaceTest, LowerBoundRereadsTheNodeItPassedOver) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  for (uint64_t x = 90; x <= 160; x += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, x));
  // The reader knows where P and Q are: its walk READs P first.
  auto warm = r->LowerBound(85, Path::kLoopback);
  ASSERT_TRUE(warm.ok() && warm->has_value() && (*warm)->first == 170u);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> fired{0};
    spy.Set([&](const Spy::Transfer& t, uint64_t index) {
      if (Spy::IsImageRead(t, part.Image(0)) && index == I::kWords - 1 && fired.fetch_add(1) == 0) {
        EXPECT_TRUE(*w->Insert(86, Stamp(86), Path::kNative));
        EXPECT_TRUE(*w->Insert(95, Stamp(95), Path::kNative));
      }
    });
    const uint64_t retries = r->stats().lower_bound_retries;
    auto lb = r->LowerBound(85, Path::kLoopback);
    spy.Set(nullptr);
    ASSERT_TRUE(lb.ok()) << lb.status();
    ASSERT_GT(fired.load(), 0) << "the reader never READ P";
    ASSERT_TRUE(lb->has_value());
    EXPECT_NE((*lb)->first, 95u) << "95 was bound only while 86 was, and 86 < 95";
    EXPECT_EQ((*lb)->first, 86u);
    EXPECT_GT(r->stats().lower_bound_retries, retries);
    ASSERT_NO_FATAL_FAILURE(Erase(w, 95, Path::kNative));
    ASSERT_NO_FATAL_FAILURE(Erase(w, 86, Path::kNative));
  }
}

// A node LowerBound passed over is reclaimed and reused before its
// re-validation, with its version brought back to the one the reader saw:
// only a version that goes on from the node's old one across the reuse tells
// the re-validation that the node changed. The NIC reader's LowerBound(1155)
// READs Q = [1080, 1160), passes over it (1080..1150 < 1155) and goes on to
// R = [1160, end). Right after its READ of Q: Q is emptied (reclaimed, P
// takes [1080, 1160)), R splits into Q (reused higher up), Q's version is
// brought up to the one the reader saw (each put or erase in Q adds 2; with
// the old version carried on it is past it already), 1156 lands in P and
// 1160 is erased. 2000, R's first key after that, was never the answer
// while 1156 was bound: the reader must read again and answer 1156.
TEST(SkipListRaceTest, LowerBoundSeesANodeReusedSinceAsChanged) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  const uint64_t q = part.Find(1080);
  ASSERT_NE(q, 0u);
  // Q's version well past any a fresh node reaches in a split and its tower
  // links.
  for (int i = 0; i < 10; ++i) {
    ASSERT_NO_FATAL_FAILURE(Put(w, 1152, Path::kNative));
    ASSERT_NO_FATAL_FAILURE(Erase(w, 1152, Path::kNative));
  }
  ASSERT_EQ(Keys(r, Path::kLoopback).size(), 25u);  // the reader learns where P, Q and R are
  std::atomic<int> fired{0};
  std::atomic<uint64_t> seen{0}, reused{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(q)) || index != I::kWords - 1 || fired.fetch_add(1) != 0) return;
    const uint64_t v = part.Peek(q).version;
    seen.store(v);
    for (uint64_t k = 1080; k <= 1150; k += 10) Erase(w, k, Path::kNative);
    for (uint64_t k = 2080; k <= 2150; k += 10) Put(w, k, Path::kNative);
    reused.store(part.Peek(q).version);
    for (int i = 0; i < 1000 && part.Peek(q).version < v; ++i) {
      Put(w, 5000, Path::kNative);
      if (part.Peek(q).version < v) Erase(w, 5000, Path::kNative);
    }
    Put(w, 1156, Path::kNative);
    Erase(w, 1160, Path::kNative);
  });
  const uint64_t retries = r->stats().lower_bound_retries;
  auto lb = r->LowerBound(1155, Path::kLoopback);
  spy.Set(nullptr);
  ASSERT_TRUE(lb.ok()) << lb.status();
  ASSERT_GT(fired.load(), 0) << "the reader never READ Q";
  ASSERT_EQ(w->stats().reclaimed, 1u);
  ASSERT_EQ(w->stats().splits, 3u);
  const I qi = part.Peek(q);
  ASSERT_TRUE(qi.live() && qi.low > 2000) << "Q was not reused higher up";
  std::printf("[reused] Q's version %lu when read, %lu after its reuse\n", static_cast<unsigned long>(seen.load()),
              static_cast<unsigned long>(reused.load()));
  ASSERT_TRUE(lb->has_value());
  EXPECT_EQ((*lb)->first, 1156u) << "2000 answers only while neither 1156 nor 1160 is bound, and 1160 was erased after 1156 was put";
  EXPECT_GT(r->stats().lower_bound_retries, retries);
}

// ---------------------------------------------------------------------------
// Ordered reads during a split paused between its writes.

// P (the head) is split at 90 into a reused node Q that owned [90, end) in its
// earlier life, and paused between the split's writes: P already owns only
// [0, 90), Q does not own [90, end) yet. Native and NIC LowerBound(85) and
// Scan(85, 4) must wait for the split (90..120 are bound throughout, in P and
// then in Q) and then see them; a reader that takes Q's old image (dead, with
// the right low) as P's successor answers "nothing" during the pause.
TEST(SkipListRaceTest, OrderedReadsWaitForAPausedSplitIntoAReusedNode) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* native_lb = e.Native();
  Client* native_scan = e.Native();
  Client* nic_lb = e.Nic();
  Client* nic_scan = e.Nic();
  ASSERT_TRUE(w && native_lb && native_scan && nic_lb && nic_scan);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w, Path::kNative));
  // The readers remember Q as the owner of [90, end).
  for (Client* c : {native_lb, native_scan}) ASSERT_TRUE(c->LowerBound(85, Path::kNative).ok());
  for (Client* c : {nic_lb, nic_scan}) ASSERT_TRUE(c->LowerBound(85, Path::kLoopback).ok());
  // Q emptied: reclaimed (dead, low 90) and freed.
  for (uint64_t k = 90; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k, Path::kNative));
  ASSERT_EQ(w->stats().reclaimed, 1u);
  // P full again (10..160); 170 splits it at 90 into Q once more.
  for (uint64_t k = 90; k <= 160; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k, Path::kNative));
  absl::Notification in_split, release;
  g_in_split = &in_split;
  g_split_release = &release;
  g_pause_armed = true;
  std::thread splitter([&] { EXPECT_TRUE(w->Put(170, Stamp(170), Path::kNative).ok()); });
  ASSERT_TRUE(in_split.WaitForNotificationWithTimeout(absl::Seconds(60)));
  struct Answer {
    absl::StatusOr<std::vector<uint64_t>> keys{std::vector<uint64_t>{}};
    bool before_release = false;
    absl::Notification done;
  };
  Answer answers[4];
  auto lower_bound = [&](Client* c, Path p, Answer* out) {
    auto r = c->LowerBound(85, p);
    out->before_release = !release.HasBeenNotified();
    if (!r.ok()) {
      out->keys = r.status();
    } else if (r->has_value()) {
      out->keys = std::vector<uint64_t>{(*r)->first};
    }
    out->done.Notify();
  };
  auto scan = [&](Client* c, Path p, Answer* out) {
    auto r = c->Scan(85, 4, p);
    out->before_release = !release.HasBeenNotified();
    if (!r.ok()) {
      out->keys = r.status();
    } else {
      std::vector<uint64_t> keys;
      for (const auto& [k, v] : *r) keys.push_back(k);
      out->keys = keys;
    }
    out->done.Notify();
  };
  std::vector<std::thread> readers;
  readers.emplace_back(lower_bound, native_lb, Path::kNative, &answers[0]);
  readers.emplace_back(scan, native_scan, Path::kNative, &answers[1]);
  readers.emplace_back(lower_bound, nic_lb, Path::kLoopback, &answers[2]);
  readers.emplace_back(scan, nic_scan, Path::kLoopback, &answers[3]);
  // A reader that does not wait answers at once; give them a second.
  const absl::Time until = absl::Now() + absl::Seconds(1);
  for (Answer& a : answers) a.done.WaitForNotificationWithDeadline(until);
  release.Notify();
  for (std::thread& t : readers) t.join();
  splitter.join();
  const char* names[4] = {"native LowerBound", "native Scan", "NIC LowerBound", "NIC Scan"};
  const std::vector<uint64_t> want[4] = {{90}, {90, 100, 110, 120}, {90}, {90, 100, 110, 120}};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(answers[i].keys.ok()) << names[i] << ": " << answers[i].keys.status();
    EXPECT_EQ(*answers[i].keys, want[i]) << names[i];
    EXPECT_FALSE(answers[i].before_release) << names[i] << " answered while the split was between its writes";
  }
  EXPECT_EQ(Keys(w), Concat({Range(10, 170, 10)}));
}

// ---------------------------------------------------------------------------
// Scan against a node reclaimed and reused elsewhere, and against a torn
// read-ahead copy.

// Right after a NIC scanner's READ of P (whose copy links Q), Q is emptied
// (reclaimed: P takes its range) and reused by a split of R, higher up, at
// 2070. The scan must go on from the owner of 1080 (P again, then R), not
// from Q: R's keys 1160, 2000..2060 are bound throughout. With limit 9 the
// scan reads Q alone; with limit 100 it reads Q and R ahead in one doorbell.
TEST(SkipListRaceTest, ScanDoesNotFollowALinkToANodeReusedElsewhere) {
  for (size_t limit : {size_t{9}, size_t{100}}) {
    SCOPED_TRACE(absl::StrCat("limit ", limit));
    Env e;
    ASSERT_TRUE(MakeEnv(&e));
    Spy spy(*e.cluster);
    const Part part = FindPart(e, spy);
    Client* w = e.Native();
    Client* s = e.Nic();
    ASSERT_TRUE(w && s);
    ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
    ASSERT_EQ(Keys(s, Path::kLoopback).size(), 25u);  // the scanner learns where P, Q and R are
    std::atomic<int> fired{0};
    spy.Set([&](const Spy::Transfer& t, uint64_t index) {
      if (!Spy::IsImageRead(t, part.Image(0)) || index != I::kWords - 1 || fired.fetch_add(1) != 0) return;
      for (uint64_t k = 1080; k <= 1150; k += 10) Erase(w, k, Path::kNative);
      for (uint64_t k = 2080; k <= 2150; k += 10) Put(w, k, Path::kNative);
    });
    auto r = s->Scan(1000, limit, Path::kLoopback);
    spy.Set(nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GT(fired.load(), 0);
    ASSERT_EQ(w->stats().reclaimed, 1u);
    ASSERT_EQ(w->stats().splits, 3u);
    std::vector<uint64_t> got;
    for (const auto& [k, v] : *r) got.push_back(k);
    std::vector<uint64_t> want = Concat({Range(1000, 1070, 10), {1160}, Range(2000, 2150, 10)});
    want.resize(std::min(want.size(), limit));
    EXPECT_EQ(got, want);
  }
}

// A NIC scanner's read-ahead copy of Q is torn by a write of Q's first
// entry (1080) landing in the middle of its READ: the scan must not return
// the mix (it reads Q again).
TEST(SkipListRaceTest, ScanRejectsATornReadAheadCopy) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* s = e.Nic();
  ASSERT_TRUE(w && s);
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  ASSERT_EQ(Keys(s, Path::kLoopback).size(), 25u);
  const uint64_t q = part.Find(1080);
  ASSERT_NE(q, 0u);
  ASSERT_EQ(part.Peek(q).keys[0], 1080u);
  ASSERT_TRUE(part.Peek(q).Occupied(0));
  for (uint64_t round = 1; round <= 3; ++round) {
    std::atomic<int> fired{0};
    spy.Set([&](const Spy::Transfer& t, uint64_t index) {
      if (!Spy::IsImageRead(t, part.Image(q)) || index != Wd::Value(0) + 1 || fired.fetch_add(1) != 0) return;
      auto p = w->Put(1080, Stamp(round * 1000000 + 1080), Path::kNative);
      EXPECT_TRUE(p.ok()) << p.status();
    });
    auto r = s->Scan(1000, 100, Path::kLoopback);
    spy.Set(nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GT(fired.load(), 0);
    ASSERT_EQ(r->size(), 25u);
    for (const auto& [k, v] : *r) {
      EXPECT_TRUE(Whole(v)) << "key " << k << ": words " << v.w[0] << " .. " << v.w[6] << " (a torn copy)";
    }
    EXPECT_EQ((*r)[8].first, 1080u);
    EXPECT_EQ((*r)[8].second.w[6], round * 1000000 + 1080);
  }
}

// ---------------------------------------------------------------------------
// Native readers against writers.

// Full speed: a writer overwrites one key (its value straddles two cache
// lines) in a loop; a native reader loops over Get, LowerBound and Scan of
// it. Every value read must be one write's, and a reader never goes back to
// an older one.
class NativeReaderTest : public ::testing::TestWithParam<Path> {};

TEST_P(NativeReaderTest, SeesWholeValuesAtFullSpeed) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* writer = e.Nic();
  Client* reader = e.Native();
  ASSERT_TRUE(writer && reader);
  constexpr uint64_t kHot = 2;
  ASSERT_NO_FATAL_FAILURE(Put(writer, 1));     // entry 0
  ASSERT_NO_FATAL_FAILURE(Put(writer, kHot));  // entry 1: bytes 376..431 of the node, across a line
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread wt([&] {
    for (uint64_t i = 1; !stop.load(); ++i) {
      if (!writer->Put(kHot, Stamp(kHot + i), GetParam()).ok()) break;
      written = i;
    }
  });
  std::string failure;
  uint64_t reads = 0, last = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
  while (failure.empty() && (elapsed() < std::chrono::milliseconds(1500) || written.load() < 1000) &&
         elapsed() < std::chrono::seconds(30)) {
    Wide v;
    const int op = static_cast<int>(reads % 3);
    if (op == 0) {
      auto g = reader->Get(kHot, Path::kNative);
      if (!g.ok() || !g->has_value()) failure = "Get failed";
      if (failure.empty()) v = **g;
    } else if (op == 1) {
      auto lb = reader->LowerBound(kHot, Path::kNative);
      if (!lb.ok() || !lb->has_value() || (*lb)->first != kHot) failure = "LowerBound failed";
      if (failure.empty()) v = (*lb)->second;
    } else {
      auto sc = reader->Scan(kHot, 1, Path::kNative);
      if (!sc.ok() || sc->size() != 1 || (*sc)[0].first != kHot) failure = "Scan failed";
      if (failure.empty()) v = (*sc)[0].second;
    }
    if (!failure.empty()) break;
    ++reads;
    if (!Whole(v)) {
      failure = absl::StrCat("op ", op, " read a torn value: ", v.w[0], " .. ", v.w[6]);
    } else if (v.w[0] < last) {
      failure = absl::StrCat("op ", op, " read ", v.w[0], " after ", last);
    } else {
      last = v.w[0];
    }
  }
  stop = true;
  wt.join();
  std::printf("%llu reads against %llu writes, %llu torn reads retried\n", (unsigned long long)reads,
              (unsigned long long)written.load(), (unsigned long long)reader->read_stats().torn_reads);
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_GT(written.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Writers, NativeReaderTest, ::testing::Values(Path::kNative, Path::kLoopback),
                         [](const ::testing::TestParamInfo<Path>& p) {
                           return std::string(p.param == Path::kNative ? "native_writer" : "nic_writer");
                         });

// Inside a NIC writer's WRITE chain: its WRITE of the value is paused half
// done (the copy hook), and a native reader reads the key then (Get, then
// LowerBound, then Scan, one per round). The reader must not take the half
// written node: it waits for the node's lock (the hook sees it queue there
// and lets the writer go on) and then reads the new value whole.
TEST(SkipListRaceTest, NativeReaderInsideANicWritersChainWaits) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* writer = e.Nic();
  Client* reader = e.Native();
  ASSERT_TRUE(writer && reader);
  constexpr uint64_t kHot = 2;
  ASSERT_NO_FATAL_FAILURE(Put(reader, 1, Path::kNative));
  ASSERT_NO_FATAL_FAILURE(Put(reader, kHot, Path::kNative));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const uint64_t stamp = 1000 + round;
    std::atomic<bool> fired{false}, hook_done{false}, read_done{false}, read_in_hook{false};
    std::thread read;
    Wide got = Stamp(0);
    absl::Status read_status;
    spy.Set([&](const Spy::Transfer& t, uint64_t index) {
      if (t.op != rdma::Opcode::kWrite || t.length != sizeof(Wide) || index != 2 || fired.exchange(true)) return;
      read = std::thread([&] {
        if (round == 0) {
          auto g = reader->Get(kHot, Path::kNative);
          read_status = g.status();
          if (g.ok() && g->has_value()) got = **g;
        } else if (round == 1) {
          auto lb = reader->LowerBound(kHot, Path::kNative);
          read_status = lb.status();
          if (lb.ok() && lb->has_value()) got = (*lb)->second;
        } else {
          auto sc = reader->Scan(kHot, 1, Path::kNative);
          read_status = sc.status();
          if (sc.ok() && sc->size() == 1) got = (*sc)[0].second;
        }
        read_done = true;
      });
      // Until the reader has answered or queued for the head's lock.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!read_done.load() && part.At(0).lock.l_tail.Load() == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      read_in_hook = read_done.load();
      hook_done = true;
    });
    auto p = writer->Put(kHot, Stamp(stamp), Path::kLoopback);
    ASSERT_TRUE(p.ok()) << p.status();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!hook_done.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    ASSERT_TRUE(hook_done.load()) << "the value WRITE was never copied";
    read.join();
    spy.Set(nullptr);
    ASSERT_TRUE(read_status.ok()) << read_status;
    EXPECT_TRUE(Whole(got)) << "a half-written value: " << got.w[0] << " .. " << got.w[6];
    EXPECT_FALSE(read_in_hook.load()) << "the reader answered while the writer was inside";
    EXPECT_EQ(got.w[0], stamp);
  }
}

// ---------------------------------------------------------------------------
// Stale remembered locations.

class StaleLocationTest : public ::testing::TestWithParam<Path> {};

// Q, which the stale client remembers as the owner of [90, end), is
// reclaimed (dead): a write of 120 through that location must go to P, which
// owns 120 now, and so must a read.
TEST_P(StaleLocationTest, NodeReclaimedSince) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  Client* stale_reader = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer && stale_reader);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  for (Client* c : {stale_writer, stale_reader}) ASSERT_TRUE(c->Get(170, GetParam()).ok());
  for (uint64_t k = 90; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  ASSERT_EQ(w->stats().reclaimed, 1u);
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  ASSERT_NO_FATAL_FAILURE(Put(w, 135));
  auto g = stale_reader->Get(135, GetParam());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "135 read through a reclaimed node";
  EXPECT_EQ(Keys(w), Concat({Range(10, 80, 10), {125, 135}}));
}

// Q, remembered as the owner of [90, end), is reclaimed and reused for
// [200, end): a write of 125 and a read of 135 through it must go to P.
TEST_P(StaleLocationTest, NodeReusedHigherUp) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  Client* stale_reader = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer && stale_reader);
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  for (Client* c : {stale_writer, stale_reader}) ASSERT_TRUE(c->Get(170, GetParam()).ok());
  for (uint64_t k = 90; k <= 170; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  // P holds 10..80 and 200..270, full; 280 splits it at 200 into Q.
  for (uint64_t k = 200; k <= 280; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));
  ASSERT_EQ(w->stats().splits, 2u);
  ASSERT_NO_FATAL_FAILURE(Put(w, 135));
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  auto g = stale_reader->Get(135, GetParam());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "135 read through a node reused for keys above it";
  EXPECT_EQ(Keys(w), Concat({Range(10, 80, 10), {125, 135}, Range(200, 280, 10)}));
}

// P, remembered as the owner of [0, end), splits at 90: a write of 125
// through that location must go on to Q.
TEST_P(StaleLocationTest, NodeSplitSince) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Client* w = e.Native();
  Client* stale_writer = GetParam() == Path::kNative ? e.Native() : e.Nic();
  ASSERT_TRUE(w && stale_writer);
  ASSERT_NO_FATAL_FAILURE(Put(w, 10));
  ASSERT_TRUE(stale_writer->Get(10, GetParam()).ok());
  ASSERT_NO_FATAL_FAILURE(SplitHeadAt90(w));
  ASSERT_NO_FATAL_FAILURE(Put(stale_writer, 125, GetParam()));
  auto g = w->Get(125);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "125 written to the node left of the split";
  EXPECT_EQ(Keys(w), Concat({Range(10, 120, 10), {125}, Range(130, 170, 10)}));
}

INSTANTIATE_TEST_SUITE_P(Paths, StaleLocationTest, ::testing::Values(Path::kNative, Path::kLoopback),
                         [](const ::testing::TestParamInfo<Path>& p) {
                           return std::string(p.param == Path::kNative ? "native" : "loopback");
                         });

// ---------------------------------------------------------------------------
// A reclaimer racing writers, between its descent and its locks.

// A NIC client erases 1150, Q's last key, and so reclaims Q. Once Q's height
// is lowered and it is linked at level 0 only, the reclaimer descends to find
// Q's predecessor; right after it READs the head there (holding no lock),
// `meanwhile` runs natively.
void ReclaimWithRace(const std::function<void(Client*)>& meanwhile, Env& e, Client** w_out, Client** r_out) {
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  *w_out = w;
  *r_out = r;
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  for (uint64_t k = 1080; k <= 1140; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));
  ASSERT_TRUE(r->Get(1150, Path::kLoopback).ok());  // the reclaimer remembers Q
  const uint64_t q = part.Find(1080);
  ASSERT_NE(q, 0u);
  std::atomic<int> fired{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(0)) || index != I::kWords - 1 || fired.load() != 0) return;
    const I qi = part.Peek(q);
    if (!qi.live() || qi.bitmap() != 0 || qi.height() != 1 || !part.LockFree(0) || !part.LockFree(q) ||
        part.LinkedAbove(q)) {
      return;
    }
    fired = 1;
    meanwhile(w);
  });
  auto er = r->Erase(1150, Path::kLoopback);
  spy.Set(nullptr);
  ASSERT_TRUE(er.ok()) << er.status();
  ASSERT_TRUE(er->has_value());
  ASSERT_EQ(fired.load(), 1) << "the reclaimer's descent was not seen";
}

// Q is refilled (1100) before the reclaimer locks it: it must leave Q be.
TEST(SkipListRaceTest, ReclaimerLeavesANodeRefilledMeanwhile) {
  Env e;
  Client *w = nullptr, *r = nullptr;
  ASSERT_NO_FATAL_FAILURE(ReclaimWithRace([](Client* w) { Put(w, 1100, Path::kNative); }, e, &w, &r));
  auto g = w->Get(1100);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "1100 was reclaimed with its node";
  EXPECT_EQ(r->stats().reclaimed, 0u);
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), {1100, 1160}, Range(2000, 2070, 10)}));
}

// P splits at 1071 (1071..1079 go to a new node S, Q's predecessor now)
// before the reclaimer locks P: it must find S and unlink Q after S.
TEST(SkipListRaceTest, ReclaimerFindsAPredecessorSplitMeanwhile) {
  Env e;
  Client *w = nullptr, *r = nullptr;
  ASSERT_NO_FATAL_FAILURE(ReclaimWithRace(
      [](Client* w) {
        for (uint64_t k = 1071; k <= 1079; ++k) Put(w, k, Path::kNative);
      },
      e, &w, &r));
  EXPECT_EQ(w->stats().splits, 3u);
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), Range(1071, 1079, 1), {1160}, Range(2000, 2070, 10)}));
  auto g = w->Get(1075);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->has_value()) << "S was cut out of the list";
  EXPECT_EQ(r->stats().reclaimed, 1u) << "Q was left in place";
}

// The reclaimer's predecessor Q is itself emptied and reclaimed between the
// reclaimer's descent (which READ Q live, linking R) and its lock on Q; Q's
// reclaimer is paused between its unlink and its free (the
// BetweenUnlinkAndFree hook), so Q is dead and still links R. The reclaimer
// must not unlink R after dead Q: P links R now.
TEST(SkipListRaceTest, ReclaimerSkipsAPredecessorReclaimedMeanwhile) {
  Env e;
  ASSERT_TRUE(MakeEnv(&e));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy);
  Client* w = e.Native();
  Client* r = e.Nic();
  ASSERT_TRUE(w && r);
  ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));
  ASSERT_NO_FATAL_FAILURE(Erase(w, 1160));
  for (uint64_t k = 2000; k <= 2060; k += 10) ASSERT_NO_FATAL_FAILURE(Erase(w, k));  // R holds 2070 only
  ASSERT_TRUE(r->Get(2070, Path::kLoopback).ok());  // the reclaimer remembers R
  const uint64_t q = part.Find(1080), rr = part.Find(1160);
  ASSERT_TRUE(q != 0 && rr != 0);
  absl::Notification before_free, release;
  g_before_free = &before_free;
  g_free_release = &release;
  std::thread other;
  std::atomic<int> fired{0};
  // The last READ of the reclaimer's level-0 descent is R's (its low is past
  // the key: Q is the predecessor).
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(rr)) || index != I::kWords - 1 || fired.load() != 0) return;
    const I ri = part.Peek(rr);
    if (!ri.live() || ri.bitmap() != 0 || ri.height() != 1 || !part.AllLocksFree() || part.LinkedAbove(rr)) return;
    fired = 1;
    g_free_pause_armed = true;
    other = std::thread([w] {
      for (uint64_t k = 1080; k <= 1150; k += 10) Erase(w, k, Path::kNative);
    });
    EXPECT_TRUE(before_free.WaitForNotificationWithTimeout(absl::Seconds(60))) << "Q's reclaimer did not pause";
  });
  auto er = r->Erase(2070, Path::kLoopback);
  spy.Set(nullptr);
  release.Notify();
  if (other.joinable()) other.join();
  ASSERT_TRUE(er.ok()) << er.status();
  ASSERT_EQ(fired.load(), 1) << "the reclaimer's descent was not seen";
  EXPECT_EQ(w->stats().reclaimed, 1u);
  EXPECT_EQ(r->stats().reclaimed, 1u);
  EXPECT_EQ(part.LinkProblems(), "");
  EXPECT_EQ(Keys(w), Range(1000, 1070, 10));
  ASSERT_NO_FATAL_FAILURE(Put(w, 1100));
  ASSERT_NO_FATAL_FAILURE(Put(w, 2100));
  EXPECT_EQ(Keys(w), Concat({Range(1000, 1070, 10), {1100, 2100}}));
}

// ---------------------------------------------------------------------------
// Linking a split's tower, racing writers.

// A NIC client inserts ascending keys until one of its splits makes a node
// taller than 1, the first: the head is then its predecessor at level 1 and
// links nothing there. Right after the client's descent to link that level
// READs the head (holding no lock), `meanwhile(victim)` runs natively. The
// part's links must satisfy layout.h invariant 4 afterwards.
void TowerRace(const std::function<void(Client*, const Part&, uint64_t victim)>& meanwhile, Env& e,
               Part* part_out, Client** w_out, uint64_t* victim_out) {
  constexpr uint64_t kBigPool = 256;
  ASSERT_TRUE(MakeEnv(&e, 1, {}, kBigPool));
  Spy spy(*e.cluster);
  const Part part = FindPart(e, spy, kBigPool);
  *part_out = part;
  Client* w = e.Native();
  Client* n = e.Nic();
  ASSERT_TRUE(w && n);
  *w_out = w;
  std::atomic<uint64_t> victim{0};
  spy.Set([&](const Spy::Transfer& t, uint64_t index) {
    if (!Spy::IsImageRead(t, part.Image(0)) || index != I::kWords - 1 || victim.load() != 0) return;
    if (part.Peek(0).next[1] != 0 || !part.AllLocksFree()) return;
    for (uint64_t i = 1; i < part.nodes; ++i) {
      const I img = part.Peek(i);
      if (img.live() && img.height() >= 2 && !part.LinkedAbove(i)) {
        victim = i;
        meanwhile(w, part, i);
        return;
      }
    }
  });
  for (uint64_t k = 1; k <= 600 && victim.load() == 0; ++k) {
    auto p = n->Put(k * 1000, Stamp(k * 1000), Path::kLoopback);
    ASSERT_TRUE(p.ok()) << p.status();
  }
  spy.Set(nullptr);
  ASSERT_NE(victim.load(), 0u) << "no split made a node taller than 1";
  *victim_out = victim.load();
}

// The node is emptied (and so reclaimed) meanwhile: its tower must not be
// linked (a dead node in an upper level).
TEST(SkipListRaceTest, TowerLinkSkipsANodeReclaimedMeanwhile) {
  Env e;
  Part part;
  Client* w = nullptr;
  uint64_t victim = 0;
  ASSERT_NO_FATAL_FAILURE(TowerRace(
      [](Client* w, const Part& part, uint64_t v) {
        const I img = part.Peek(v);
        for (size_t i = 0; i < si::kFanout; ++i) {
          if (img.Occupied(i)) Erase(w, img.keys[i], Path::kNative);
        }
      },
      e, &part, &w, &victim));
  EXPECT_GE(w->stats().reclaimed, 1u);
  EXPECT_FALSE(part.Peek(victim).live() && part.Peek(victim).height() >= 2);
  EXPECT_EQ(part.LinkProblems(), "");
}

// A node taller than 1 is split off just below it meanwhile, and linked at
// level 1 after the head: the client must link its node after that one, not
// after the head.
TEST(SkipListRaceTest, TowerLinkFindsAPredecessorLinkedMeanwhile) {
  Env e;
  Part part;
  Client* w = nullptr;
  uint64_t victim = 0;
  std::atomic<bool> made{false};
  ASSERT_NO_FATAL_FAILURE(TowerRace(
      [&made](Client* w, const Part& part, uint64_t v) {
        // Keys just below the node's low split its level-0 predecessor
        // again and again, until a split makes a node taller than 1.
        const uint64_t m = part.Peek(v).low;
        for (uint64_t j = 1; j <= 400 && !made.load(); ++j) {
          Put(w, m - j, Path::kNative);
          for (uint64_t i = 1; i < part.nodes; ++i) {
            const I img = part.Peek(i);
            if (i != v && img.live() && img.height() >= 2 && img.low < m && part.LinkedAbove(i)) made = true;
          }
        }
      },
      e, &part, &w, &victim));
  ASSERT_TRUE(made.load()) << "no split below the node made a node taller than 1";
  EXPECT_EQ(part.LinkProblems(), "");
  EXPECT_TRUE(part.LinkedAbove(victim)) << "the node's tower was not linked";
}

// ---------------------------------------------------------------------------
// Corruption that the checks under the locks report.

// A node whose words do not match its checksum (written without the lock):
// a writer that locks it reports DataLoss rather than publishing over it.
TEST(SkipListRaceTest, WriterReportsANodeFailingItsChecksum) {
  for (Path p : {Path::kNative, Path::kLoopback}) {
    SCOPED_TRACE(rdma::PathName(p));
    Env e;
    ASSERT_TRUE(MakeEnv(&e));
    Spy spy(*e.cluster);
    const Part part = FindPart(e, spy);
    Client* w = p == Path::kNative ? e.Native() : e.Nic();
    ASSERT_NE(w, nullptr);
    ASSERT_NO_FATAL_FAILURE(Put(w, 1, p));
    ASSERT_NO_FATAL_FAILURE(Put(w, 2, p));
    rdma::PlainWord& word = part.At(0).values[0][3];
    const uint64_t good = word.Load();
    word.Store(good ^ 0x100);
    auto r = w->Put(2, Stamp(7), p);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    word.Store(good);
  }
}

// A free list that names a live node, or a next_free just before a live
// node: the split that takes it reports DataLoss rather than overwriting the
// node, and a free list naming a live node is left as it was.
TEST(SkipListRaceTest, SplitReportsALiveNodeFromTheAllocator) {
  for (bool from_free_list : {true, false}) {
    SCOPED_TRACE(from_free_list ? "free list" : "never-used nodes");
    Env e;
    ASSERT_TRUE(MakeEnv(&e));
    Spy spy(*e.cluster);
    const Part part = FindPart(e, spy);
    Client* w = e.Native();
    ASSERT_NE(w, nullptr);
    ASSERT_NO_FATAL_FAILURE(ThreeNodes(w));  // Q is node 1, R node 2
    ASSERT_EQ(part.Find(1080), 1u);
    for (uint64_t k = 2080; k <= 2140; k += 10) ASSERT_NO_FATAL_FAILURE(Put(w, k));  // R full
    if (from_free_list) {
      part.Header().free_head.Store(1);
    } else {
      part.Header().next_free.Store(0);
    }
    auto r = w->Put(2150, Stamp(2150));  // splits R
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    if (from_free_list) {
      EXPECT_EQ(part.Header().free_head.Load(), 1u) << "the free list moved past a live node";
    }
    auto g = w->Get(1080);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(g->has_value()) << "Q was overwritten";
  }
}

}  // namespace
}  // namespace structures
