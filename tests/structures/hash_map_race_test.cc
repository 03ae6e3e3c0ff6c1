// Races of the hash map's readers and writers with each other, with splits
// and with directory publishes, each built so that one missing concurrency
// check changes what an operation returns (tests/audit: the mutants of the
// hash map name these tests):
//  * native readers against a native writer with no think time, on a few
//    keys of one unit (torn slots, a slot reused by another key, key 0 in
//    empty slots), and NIC writers contending on one key;
//  * splits paused between their writes (a test Checks whose SplitWrites
//    waits at a named step): readers and writers that arrive before the
//    publish, writers that enter the new segment after it while the split
//    still holds the old one, and clients whose directory copy predates the
//    split and erase, put or read a key it moved;
//  * a second split of a segment that someone split meanwhile;
//  * directory reads overlapping a publish: a NIC splitter's publish paused
//    with half an entry written (soft NIC, byte copies), a NIC directory READ
//    paused mid-entry while a native split publishes, a depth that a read
//    across a wrapped version pairs with newer entries, and the segment
//    count's seqlock;
//  * slots and directory entries that are inconsistent under the lock
//    (DataLoss, not a wrong answer).
// Soft NIC only (its copy hooks and byte-copy mode); every wait is bounded.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "rdma/cluster.h"
#include "rdma/path.h"
#include "rdma/soft/soft_nic.h"
#include "structures/hash_map/hash_map.h"
#include "testing/backends.h"
#include "util/status_macros.h"

namespace structures::hash_map_internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Four equal words, as the stress tests' StressValue: a read mixing two
// writes shows words that differ.
struct Val {
  int64_t w[4];
};
using L = SlotLayout<Val>;

// The value `n` (1 <= n < 2^32) of key `k` (< 2^31): never zero, and names
// its key.
Val V(uint64_t k, int64_t n) {
  const int64_t x = static_cast<int64_t>(k << 32) | n;
  return {{x, x, x, x}};
}
int64_t SeqOf(const Val& v) { return v.w[0] & 0xffffffff; }
bool Is(const std::optional<Val>& got, uint64_t k, int64_t n) {
  if (!got.has_value()) return false;
  const Val want = V(k, n);
  return std::memcmp(&*got, &want, sizeof(Val)) == 0;
}
std::string Show(const absl::StatusOr<std::optional<Val>>& r) {
  if (!r.ok()) return r.status().ToString();
  if (!r->has_value()) return "absent";
  const Val& v = **r;
  return absl::StrCat("{", v.w[0], ",", v.w[1], ",", v.w[2], ",", v.w[3], "}");
}
// What is wrong with a read of key `k` (empty: nothing): its words must be
// equal, nonzero, and name `k`.
std::string BadRead(const std::optional<Val>& got, uint64_t k) {
  if (!got.has_value()) return "";
  const Val& v = *got;
  if (v.w[0] != v.w[1] || v.w[1] != v.w[2] || v.w[2] != v.w[3]) return "torn value " + Show(got);
  if (SeqOf(v) == 0 || (static_cast<uint64_t>(v.w[0]) >> 32) != k) {
    return absl::StrCat("key ", k, " read value ", Show(got), ", which no put of it wrote");
  }
  return "";
}

// A one-shot latch (std primitives, which TSan sees).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [this] { return open_; });
  }
  bool is_open() {
    std::lock_guard<std::mutex> l(mu_);
    return open_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

constexpr milliseconds kLong{30000};  // waits that only a broken map exhausts

// Where a split may be paused: after its write of the new segment Y, after
// its rewrite of the old segment X, after the directory's publish (still
// holding the directory lock and X's unit locks).
enum class At { kNone, kAfterNew, kAfterOld, kAfterPublish };

// The pause a test arms for one split, and a function the next split runs on
// its own thread right before its publish.
struct SplitPause {
  std::atomic<At> armed{At::kNone};
  Gate reached, release;
  std::function<void()> before_publish;
};
std::atomic<SplitPause*> g_pause{nullptr};

// Runs `f` when it goes out of scope.
class AtExit {
 public:
  explicit AtExit(std::function<void()> f) : f_(std::move(f)) {}
  ~AtExit() { f_(); }
  AtExit(const AtExit&) = delete;
  AtExit& operator=(const AtExit&) = delete;

 private:
  std::function<void()> f_;
};

// Makes `p` the pause of the splits that start while it lives.
class PauseScope {
 public:
  explicit PauseScope(SplitPause* p) { g_pause.store(p); }
  ~PauseScope() { g_pause.store(nullptr); }
  PauseScope(const PauseScope&) = delete;
  PauseScope& operator=(const PauseScope&) = delete;
};

void PauseAt(At at) {
  SplitPause* p = g_pause.load();
  if (p == nullptr) return;
  At want = at;
  if (!p->armed.compare_exchange_strong(want, At::kNone)) return;
  p->reached.Open();
  p->release.Wait(kLong);
}

// The shipped split, in the shipped order, with pause points.
struct PausingChecks : ShippedChecks {
  template <typename Slot, typename Units, typename Publish>
  static absl::Status SplitWrites(Units& units, size_t x, size_t y, uint64_t* xs, uint64_t* ys, size_t n_slots,
                                  int new_epoch, Publish&& publish) {
    RETURN_IF_ERROR(units.WriteSegmentSlots(y, ys));
    PauseAt(At::kAfterNew);
    RETURN_IF_ERROR(units.WriteSegmentSlots(x, xs));
    PauseAt(At::kAfterOld);
    if (SplitPause* p = g_pause.load(); p != nullptr && p->before_publish) std::exchange(p->before_publish, nullptr)();
    RETURN_IF_ERROR(publish());
    PauseAt(At::kAfterPublish);
    return absl::OkStatus();
  }
};

using Map = BasicHashMap<Val, ShippedChecks>;
using GrowMap = BasicHashMap<Val, PausingChecks>;

// One soft-NIC node (or two), with the part's memory at hand.
template <typename M>
struct Env {
  std::unique_ptr<rdma::Cluster> cluster;
  std::optional<M> map;
  rdma::soft::SoftDevice* dev0 = nullptr;  // node 0's NIC

  Unit<Val>* units() const { return map->PartBase(0).template local<Unit<Val>>(); }
  DirectoryHeader* dir() const {
    return reinterpret_cast<DirectoryHeader*>(reinterpret_cast<char*>(units()) +
                                              map->geometry().pool_units() * L::kUnitBytes);
  }
  rdma::PlainWord* entries() const {
    return reinterpret_cast<rdma::PlainWord*>(reinterpret_cast<char*>(dir()) + kDirEntriesOffset);
  }
  rdma::RemotePtr dir_lock() const { return map->PartBase(0) + map->geometry().pool_units() * L::kUnitBytes; }

  // A client on `node` with its own Session (null: native only).
  struct Handle {
    std::unique_ptr<rdma::Session> session;
    std::unique_ptr<typename M::Client> client;
    typename M::Client* operator->() const { return client.get(); }
  };
  Handle NewClient(rdma::NodeId node = 0, bool nic = true) {
    Handle h;
    if (nic) {
      auto s = cluster->NewSession(node);
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) return h;
      h.session = std::move(*s);
    }
    auto c = h.session ? map->NewClient(*h.session) : map->NewClient(cluster->node(node));
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) h.client = std::move(*c);
    return h;
  }
};

template <typename M>
Env<M> MakeEnv(size_t groups, size_t max_groups, int nodes = 1) {
  Env<M> e;
  e.cluster = rdma::testing::MakeCluster("soft", nodes, 16 << 20);
  if (e.cluster == nullptr) return e;
  e.dev0 = rdma::soft::AsSoftDevice(e.cluster->node(0).device());
  HashMapOptions o;
  o.groups_per_node = groups;
  o.max_groups_per_node = max_groups;
  auto m = M::Create(*e.cluster, o);
  EXPECT_TRUE(m.ok()) << m.status();
  if (m.ok()) e.map.emplace(std::move(*m));
  return e;
}

// Keys (from `from` up) homed on node 0 of `nodes` whose directory hash has
// `bits` as its low bits under `mask`, for parts of `segment_units` units
// per segment, and, when `unit` >= 0, whose two candidates are both that
// unit.
std::vector<uint64_t> KeysWith(size_t n, int nodes, size_t segment_units, uint64_t mask, uint64_t bits,
                               int unit = -1, uint64_t from = 1) {
  std::vector<uint64_t> keys;
  for (uint64_t k = from; keys.size() < n && k < (uint64_t{1} << 40); ++k) {
    const Placement p = Place(k, nodes, segment_units);
    if (p.node != 0 || (p.dir & mask) != bits) continue;
    if (unit >= 0 && (p.c[0].unit != static_cast<size_t>(unit) || p.c[1].unit != static_cast<size_t>(unit))) {
      continue;
    }
    keys.push_back(k);
  }
  return keys;
}

// A thread's operation whose result the test looks at later, and whether it
// returned before the test opened `release`.
template <typename R>
struct Async {
  std::thread t;
  R result{absl::UnknownError("not run")};
  std::atomic<bool> done{false};
  bool before_release = false;
  template <typename F>
  void Start(Gate* release, F f) {
    t = std::thread([this, release, f]() mutable {
      result = f();
      before_release = !release->is_open();
      done.store(true);
    });
  }
  void Join() {
    if (t.joinable()) t.join();
  }
  ~Async() { Join(); }
};
using AsyncValue = Async<absl::StatusOr<std::optional<Val>>>;

// Waits until every op in `ops` is done or `timeout` passes.
template <typename... Op>
void WaitDone(milliseconds timeout, Op&... ops) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until && !(ops.done.load() && ...)) std::this_thread::sleep_for(milliseconds(1));
}

// ---------------------------------------------------------------------------
// Native readers against a native writer at full speed.

// One node, one unit (no growth): key A always present and rewritten, keys B
// and C put and erased in turn in the same slot (same window and start
// slot), key 0 put and erased (an empty slot's key word is 0). One writer
// with no think time, two readers with none either. Every read must be a
// value some put of that key wrote (not torn, not another key's, not the
// zeros of an empty slot), A must always be there and never go back, and
// Size must count what is there at some instant (1 to 4). The run lasts
// until each reader has met a few dozen torn reads (at least 300 ms, at
// most 3 s).
TEST(HashMapNativeRace, ReadersAgainstAWriterWithNoThinkTime) {
  Env<Map> e = MakeEnv<Map>(3, 3);
  ASSERT_TRUE(e.map.has_value());
  ASSERT_EQ(e.map->units_per_node(), 1u);
  const uint64_t a = 11;
  uint64_t b = 0, c = 0;
  {
    const Placement pa = Place(a, 1, 1);
    for (uint64_t k = 12; c == 0; ++k) {
      const Placement p = Place(k, 1, 1);
      if (p.c[0].side == pa.c[0].side && p.start == pa.start) continue;  // not A's first slot
      if (b == 0) {
        b = k;
      } else if (p.c[0].side == Place(b, 1, 1).c[0].side && p.start == Place(b, 1, 1).start) {
        c = k;
      }
    }
  }
  const uint64_t z = 0;
  const uint64_t keys[] = {a, b, c, z};
  auto w = e.NewClient(0, /*nic=*/false);
  ASSERT_NE(w.client, nullptr);
  ASSERT_TRUE(w->Put(a, V(a, 1)).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> readers_satisfied{0};
  std::mutex mu;
  std::string failure;  // the first violation
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    if (failure.empty()) failure = what;
    stop.store(true);
  };

  std::thread writer([&] {
    int64_t na = 1, n = 0;
    auto expect = [&](const absl::StatusOr<std::optional<Val>>& r, const char* op, uint64_t k,
                      std::optional<int64_t> prev) {
      const bool ok = r.ok() && (prev.has_value() ? Is(*r, k, *prev) : !r->has_value());
      if (!ok) fail(absl::StrCat("writer: ", op, "(", k, ") returned ", Show(r)));
      return ok;
    };
    while (!stop.load(std::memory_order_relaxed)) {
      for (uint64_t k : {b, c, z}) {
        ++n;
        if (!expect(w->Put(a, V(a, na + 1)), "put", a, na)) return;
        ++na;
        if (!expect(w->Put(k, V(k, n)), "put", k, std::nullopt)) return;
        if (!expect(w->Put(a, V(a, na + 1)), "put", a, na)) return;
        ++na;
        if (!expect(w->Erase(k), "erase", k, n)) return;
      }
    }
  });

  auto reader = [&](int id) {
    auto r = e.NewClient(0, /*nic=*/false);
    if (r.client == nullptr) return fail("no reader client");
    int64_t last_a = 0;
    bool satisfied = false;
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      const uint64_t k = keys[(i + id) % 4];
      if (i % 64 == 63) {
        auto s = r->Size(0);
        if (!s.ok() || *s < 1 || *s > 4) return fail(absl::StrCat("Size: ", s.ok() ? std::to_string(*s) : s.status().ToString()));
        continue;
      }
      if (k == a && i % 8 == 0) {
        auto has = r->Contains(a);
        if (!has.ok() || !*has) return fail("Contains(A) said absent or failed");
        continue;
      }
      auto got = r->Get(k);
      if (!got.ok()) return fail(absl::StrCat("Get(", k, "): ", got.status().ToString()));
      if (std::string bad = BadRead(*got, k); !bad.empty()) return fail(bad);
      if (k == a) {
        if (!got->has_value()) return fail("A, always present, read as absent");
        const int64_t n = SeqOf(**got);
        if (n < last_a) return fail(absl::StrCat("A went back from ", last_a, " to ", n));
        last_a = n;
      }
      if (!satisfied && r->read_stats().torn_reads >= 30) {
        satisfied = true;
        readers_satisfied.fetch_add(1);
      }
    }
    std::printf("reader %d: %llu torn reads, %llu under the lock\n", id,
                static_cast<unsigned long long>(r->read_stats().torn_reads),
                static_cast<unsigned long long>(r->read_stats().locked_reads));
  };
  std::thread r0(reader, 0), r1(reader, 1);
  const auto start = Clock::now();
  while (!stop.load() && Clock::now() - start < milliseconds(3000) &&
         (Clock::now() - start < milliseconds(300) || readers_satisfied.load() < 2)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  stop.store(true);
  writer.join();
  r0.join();
  r1.join();
  EXPECT_EQ(failure, "");
}

// A key of the one-unit part whose first window is side 1 (unit slots 8-23),
// and the slot a put into the empty part gives it: main group 1, at its
// start slot (unit slot 16 + start, window slot 8 + start).
uint64_t SideOneKey(uint64_t from) {
  for (uint64_t k = from;; ++k) {
    if (Place(k, 1, 1).c[0].side == 1) return k;
  }
}
size_t SlotHolding(Unit<Val>& u, uint64_t k) {
  for (size_t s = 0; s < kSlotsPerUnit; ++s) {
    if (L::Occupied(u.slots[s].w[L::kStateWord].Load()) && u.slots[s].w[L::kKeyWord].Load() == k) return s;
  }
  return kSlotsPerUnit;
}

// A NIC reader's READ of the key's window is paused inside the key's slot
// (after its first value word) while a native writer overwrites the key: the
// copy is torn (the old state, key and first value word, the new rest). The
// reader must read again, not answer from it; the read again sees the new
// value.
TEST(HashMapNativeRace, NicReadTornByANativeWriterIsReadAgain) {
  Env<Map> e = MakeEnv<Map>(3, 3);
  ASSERT_TRUE(e.map.has_value());
  const uint64_t k = SideOneKey(1);
  auto w = e.NewClient(0, false), reader = e.NewClient(0);
  ASSERT_TRUE(w.client != nullptr && reader.client != nullptr);
  ASSERT_TRUE(w->Put(k, V(k, 1), Path::kNative).ok());
  const size_t s = SlotHolding(e.units()[0], k);
  ASSERT_EQ(s, 16 + Place(k, 1, 1).start);
  // The first READ of the doorbell is the key's first window (side 1).
  const uint64_t pause_at = (s - kSlotsPerGroup) * L::kWords + L::kValueWord;
  Gate reached, release;
  std::atomic<bool> paused_once{false};
  AsyncValue get;
  AtExit let_go([&] {
    release.Open();
    e.dev0->faults().SetCopyHook(nullptr);
  });
  e.dev0->faults().SetCopyHook([&](uint64_t index) {
    if (index == pause_at && !paused_once.exchange(true)) {
      reached.Open();
      release.Wait(kLong);
    }
  });
  get.Start(&release, [&] { return reader->Get(k, Path::kLoopback); });
  ASSERT_TRUE(reached.Wait(kLong));
  ASSERT_TRUE(w->Put(k, V(k, 2), Path::kNative).ok());
  release.Open();
  get.Join();
  e.dev0->faults().SetCopyHook(nullptr);
  EXPECT_TRUE(get.result.ok() && Is(*get.result, k, 2)) << Show(get.result);
  EXPECT_GE(reader->read_stats().torn_reads, 1u);
}

// Writers of one key whose NIC acquires are contended. First, made to
// happen: the test holds the unit's lock natively, a NIC writer's acquire
// (CAS, READ of the lock line and of the key's windows, one doorbell) finds
// it held and waits, and meanwhile the holder rewrites the key's slot. The
// writer's window copy predates that write; it must read the window again
// as the holder, so its put replaces the holder's value. Then three writers
// (one native, two loopback with their own QPs) put the key at full speed;
// each put returns the value it replaced. Linearizable puts form one chain:
// every value but the last is replaced exactly once, the first put replaced
// nothing, and the last value is what a get reads.
TEST(HashMapNicWriterRace, ContendingPutsFormOneChain) {
  Env<Map> e = MakeEnv<Map>(3, 3);
  ASSERT_TRUE(e.map.has_value());
  {
    const uint64_t k = SideOneKey(1000);
    auto w = e.NewClient(0, false), nic = e.NewClient(0);
    ASSERT_TRUE(w.client != nullptr && nic.client != nullptr);
    ASSERT_TRUE(w->Put(k, V(k, 1), Path::kNative).ok());
    Unit<Val>& u = e.units()[0];
    const size_t s = SlotHolding(u, k);
    ASSERT_LT(s, kSlotsPerUnit);
    auto holder = locks::ALockClient::Create(e.cluster->node(0), nullptr);
    ASSERT_TRUE(holder.ok()) << holder.status();
    const rdma::RemotePtr unit_lock = e.map->PartBase(0);
    ASSERT_TRUE((*holder)->Lock(unit_lock, Path::kNative).ok());
    // The key's checksum word, as the writer's READ of its first window
    // (side 1) copies it: the copy of the slot is complete.
    const uint64_t copied_at = (s - kSlotsPerGroup) * L::kWords + L::kChecksumWord;
    std::atomic<bool> copied{false};
    Gate never;
    AsyncValue put;
    AtExit cleanup([&] {
      e.dev0->faults().SetCopyHook(nullptr);
      if ((*holder)->Holds(unit_lock)) {
        EXPECT_TRUE((*holder)->Unlock(unit_lock).ok());
      }
    });
    e.dev0->faults().SetCopyHook([&](uint64_t index) {
      if (index == copied_at) copied.store(true);
    });
    put.Start(&never, [&] { return nic->Put(k, V(k, 3), Path::kLoopback); });
    const auto until = Clock::now() + kLong;
    while (!copied.load() && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    ASSERT_TRUE(copied.load()) << "the writer's acquire did not READ the window";
    EXPECT_FALSE(put.done.load());
    // The holder's write: the key's next tuple, checksum last.
    uint64_t t[L::kWords];
    const Val v2 = V(k, 2);
    L::MakeSlot(u.slots[s].w[L::kStateWord].Load(), k, &v2, t);
    NativeStoreSlot<Val>(u, s, t, /*key_unchanged=*/true);
    ASSERT_TRUE((*holder)->Unlock(unit_lock).ok());
    put.Join();
    EXPECT_TRUE(put.result.ok() && Is(*put.result, k, 2)) << "replaced " << Show(put.result);
    auto now = w->Get(k, Path::kNative);
    EXPECT_TRUE(now.ok() && Is(*now, k, 3)) << Show(now);
  }
  const uint64_t k = 77;
  constexpr int kPuts = 150;
  struct Rec {
    std::optional<int64_t> prev;
    int64_t wrote;
  };
  std::vector<std::vector<Rec>> recs(3);
  std::vector<std::string> errors(3);
  std::vector<typename Env<Map>::Handle> h;
  for (int t = 0; t < 3; ++t) h.push_back(e.NewClient(0));
  for (auto& x : h) ASSERT_NE(x.client, nullptr);
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&, t] {
      const Path path = t == 0 ? Path::kNative : Path::kLoopback;
      for (int i = 1; i <= kPuts; ++i) {
        const int64_t n = t * 10000 + i;
        auto r = h[t]->Put(k, V(k, n), path);
        if (!r.ok()) {
          errors[t] = r.status().ToString();
          return;
        }
        if (std::string bad = BadRead(*r, k); !bad.empty()) {
          errors[t] = bad;
          return;
        }
        recs[t].push_back({r->has_value() ? std::optional<int64_t>(SeqOf(**r)) : std::nullopt, n});
      }
    });
  }
  for (auto& t : ts) t.join();
  for (const std::string& err : errors) ASSERT_EQ(err, "");
  std::multiset<int64_t> replaced;
  std::set<int64_t> wrote;
  int firsts = 0;
  for (const auto& v : recs) {
    for (const Rec& r : v) {
      wrote.insert(r.wrote);
      if (r.prev.has_value()) {
        replaced.insert(*r.prev);
      } else {
        ++firsts;
      }
    }
  }
  EXPECT_EQ(firsts, 1) << "puts that found the key absent";
  auto final_value = h[0]->Get(k);
  ASSERT_TRUE(final_value.ok() && final_value->has_value());
  const int64_t last = SeqOf(**final_value);
  for (int64_t n : wrote) {
    const size_t times = replaced.count(n);
    if (n == last) {
      EXPECT_EQ(times, 0u) << "the last value " << n << " was replaced";
    } else {
      EXPECT_EQ(times, 1u) << "value " << n << " was replaced " << times << " times";
    }
  }
  for (int64_t n : replaced) EXPECT_TRUE(wrote.count(n)) << "replaced " << n << ", which nobody wrote";
}

// ---------------------------------------------------------------------------
// The reader scan over scripted loads (search.h), for races that the NIC
// cannot produce and a CPU produces too rarely to test.

// Window words; slot `racy` answers its first `switch_after` loads from
// `before` and every later load from `after`.
struct Scripted {
  std::vector<uint64_t> words = std::vector<uint64_t>(L::kWindowWords, 0);
  size_t racy = 0;
  std::vector<uint64_t> before, after;
  int switch_after = 1;
  int loads_of_racy = 0;
  uint64_t operator()(size_t slot, size_t word) {
    if (slot != racy || before.empty()) return words[slot * L::kWords + word];
    return (loads_of_racy++ < switch_after ? before : after)[word];
  }
};
std::vector<uint64_t> SlotOf(uint64_t old_state, uint64_t key, const Val* v) {
  std::vector<uint64_t> s(L::kWords);
  L::MakeSlot(old_state, key, v, s.data());
  return s;
}
Placement TwoUnits() {
  Placement p;
  p.c[0] = {0, 0};
  p.c[1] = {1, 0};
  return p;
}

// QuickHit picks a slot by its key word, then reads the rest of it; here the
// key was erased from that slot and another key put there in between. The
// rest is a consistent tuple of the other key: QuickHit must not take it
// (the key word it checks the tuple with is the one it matched), and the
// full scan then says "absent".
TEST(HashMapScanRace, QuickHitRejectsASlotReusedByAnotherKey) {
  const uint64_t key = 5, other = 6;
  const Val vk = V(key, 1), vo = V(other, 1);
  Scripted w0;
  w0.racy = 3;
  w0.before = SlotOf(0, key, &vk);
  const std::vector<uint64_t> erased = SlotOf(w0.before[L::kStateWord], key, nullptr);
  w0.after = SlotOf(erased[L::kStateWord], other, &vo);
  Scripted w1;
  uint64_t found[L::kWords];
  Lookup l;
  EXPECT_FALSE(QuickHit<Val>(w0, w1, key, TwoUnits(), 2, EpochBits(0), true, true, found, &l));
  Scripted again = w0;
  again.loads_of_racy = 0;
  EXPECT_EQ(ScanWindows<Val>(again, w1, key, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kAbsent);
}

// ScanWindow with `verify` (a reader's single-window scan): a found slot whose
// value words come from another write than its state and key is kTorn.
TEST(HashMapScanRace, SingleWindowScanRejectsATornHit) {
  const uint64_t key = 5;
  const Val v1 = V(key, 1), v2 = V(key, 2);
  Scripted w0;
  w0.racy = 0;
  w0.before = SlotOf(0, key, &v1);
  w0.after = SlotOf(w0.before[L::kStateWord], key, &v2);
  w0.after[L::kStateWord] = w0.before[L::kStateWord];  // state and key loaded before the write, value after
  w0.after[L::kChecksumWord] = w0.before[L::kChecksumWord];
  w0.switch_after = 2;
  uint64_t found[L::kWords];
  EXPECT_EQ(ScanWindow<Val>(w0, key, /*side=*/0, /*start=*/0, EpochBits(0), /*verify=*/true, found).kind,
            Lookup::kTorn);
}

// ---------------------------------------------------------------------------
// Splits. One node whose part starts as one segment of one unit (24 slots):
// 24 "movers" (directory hash bit 0 set) fill it, and putting a key with
// bit 0 clear splits it: every mover goes to the new segment Y, the old one
// (X) is left empty at the next epoch, and the key goes there.

struct Growth {
  int nodes = 1;
  Env<GrowMap> e;
  std::vector<uint64_t> movers;
  uint64_t trigger = 0;
};

Growth MakeGrowth(int nodes = 1) {
  Growth g;
  g.nodes = nodes;
  g.e = MakeEnv<GrowMap>(3, 24, nodes);
  if (!g.e.map.has_value()) return g;
  const Geometry& geo = g.e.map->geometry();
  EXPECT_EQ(geo.segment_units, 1u);
  EXPECT_EQ(geo.base_depth, 0);
  EXPECT_GE(geo.max_segments, 4u);
  g.movers = KeysWith(24, nodes, 1, 1, 1);
  g.trigger = KeysWith(1, nodes, 1, 1, 0)[0];
  return g;
}

// Fills the unit with the movers (value 1 each).
void PutMovers(Growth& g, typename GrowMap::Client& c) {
  for (uint64_t m : g.movers) ASSERT_TRUE(c.Put(m, V(m, 1), Path::kNative).ok()) << m;
  ASSERT_EQ(c.growth_stats().splits, 0u);
}

// Every mover but those in `skip` reads as value 1, natively and through a
// fresh NIC client.
void ExpectMoversIntact(Growth& g, const std::set<uint64_t>& skip) {
  auto n = g.e.NewClient(0, false);
  auto r = g.e.NewClient(0);
  ASSERT_TRUE(n.client != nullptr && r.client != nullptr);
  for (uint64_t m : g.movers) {
    if (skip.count(m)) continue;
    auto a = n->Get(m, Path::kNative);
    auto b = r->Get(m, Path::kLoopback);
    EXPECT_TRUE(a.ok() && Is(*a, m, 1)) << m << ": native " << Show(a);
    EXPECT_TRUE(b.ok() && Is(*b, m, 1)) << m << ": NIC " << Show(b);
  }
}

// Paused after X is rewritten at the new epoch and before the directory
// says Y: readers with the old directory (native, reading it in place; NIC,
// with their copy) find X of another epoch, and must wait for the publish
// rather than answer "absent"; writers wait for X's locks and then retry in
// Y (a native put, a NIC erase).
TEST(HashMapGrowthRace, OperationsBeforeThePublishWaitForIt) {
  Growth g = MakeGrowth();
  ASSERT_TRUE(g.e.map.has_value());
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  PutMovers(g, *w.client);
  auto r_native = g.e.NewClient(0, false), w_native = g.e.NewClient(0, false);
  auto r_nic = g.e.NewClient(0), w_nic = g.e.NewClient(0);
  SplitPause pause;
  pause.armed = At::kAfterOld;
  PauseScope scope(&pause);
  AsyncValue split, get_native, get_nic, put_native, erase_nic;
  AtExit let_go([&] { pause.release.Open(); });
  split.Start(&pause.release, [&] { return w->Put(g.trigger, V(g.trigger, 1), Path::kNative); });
  ASSERT_TRUE(pause.reached.Wait(kLong));
  const uint64_t m0 = g.movers[0], m1 = g.movers[1], m2 = g.movers[2], m3 = g.movers[3];
  get_native.Start(&pause.release, [&] { return r_native->Get(m0, Path::kNative); });
  get_nic.Start(&pause.release, [&] { return r_nic->Get(m1, Path::kLoopback); });
  put_native.Start(&pause.release, [&] { return w_native->Put(m2, V(m2, 2), Path::kNative); });
  erase_nic.Start(&pause.release, [&] { return w_nic->Erase(m3, Path::kLoopback); });
  WaitDone(milliseconds(150), get_native, get_nic, put_native, erase_nic);
  pause.release.Open();
  for (auto* op : {&get_native, &get_nic, &put_native, &erase_nic, &split}) op->Join();
  ASSERT_TRUE(split.result.ok()) << split.result.status();
  EXPECT_TRUE(get_native.result.ok() && Is(*get_native.result, m0, 1)) << Show(get_native.result);
  EXPECT_TRUE(get_nic.result.ok() && Is(*get_nic.result, m1, 1)) << Show(get_nic.result);
  EXPECT_TRUE(put_native.result.ok() && Is(*put_native.result, m2, 1)) << Show(put_native.result);
  EXPECT_TRUE(erase_nic.result.ok() && Is(*erase_nic.result, m3, 1)) << Show(erase_nic.result);
  EXPECT_FALSE(get_native.before_release || get_nic.before_release || put_native.before_release ||
               erase_nic.before_release)
      << "an operation on X answered before the split published";
  auto after2 = w->Get(m2, Path::kNative);
  EXPECT_TRUE(after2.ok() && Is(*after2, m2, 2)) << Show(after2);
  auto after3 = w->Get(m3, Path::kNative);
  EXPECT_TRUE(after3.ok() && !after3->has_value()) << Show(after3);
  ExpectMoversIntact(g, {m2, m3});
  auto segs = w->SegmentsInUse(0);
  EXPECT_TRUE(segs.ok() && *segs == 2u);
}

// Paused after the publish, the split still holding the directory lock and
// X's unit locks: writers that look the directory up now enter Y (not
// locked by the split) and finish inside the split's window: a native put
// and erase, and a NIC get (it meets X's new epoch and re-reads the
// directory) followed by a NIC put; a native get sees their effects at once. NIC clients whose copy predates the split go to X:
// a get meets the new epoch and refreshes; an erase and a put wait for X's
// locks, then meet the new epoch and retry in Y. Nothing the split does
// afterwards may undo any of it.
TEST(HashMapGrowthRace, WritersEnterTheNewSegmentWhileTheSplitHoldsTheOld) {
  Growth g = MakeGrowth();
  ASSERT_TRUE(g.e.map.has_value());
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  PutMovers(g, *w.client);
  auto native = g.e.NewClient(0, false), fresh = g.e.NewClient(0);
  auto stale_get = g.e.NewClient(0), stale_erase = g.e.NewClient(0), stale_put = g.e.NewClient(0);
  SplitPause pause;
  pause.armed = At::kAfterPublish;
  PauseScope scope(&pause);
  AsyncValue split, in_y, get_stale, erase_stale, put_stale;
  AtExit let_go([&] { pause.release.Open(); });
  split.Start(&pause.release, [&] { return w->Put(g.trigger, V(g.trigger, 1), Path::kNative); });
  ASSERT_TRUE(pause.reached.Wait(kLong));
  const uint64_t m0 = g.movers[0], m1 = g.movers[1], m2 = g.movers[2], m3 = g.movers[3], m4 = g.movers[4],
                 m5 = g.movers[5];
  // Inside the window, in Y.
  in_y.Start(&pause.release, [&]() -> absl::StatusOr<std::optional<Val>> {
    auto p = native->Put(m0, V(m0, 2), Path::kNative);
    if (!p.ok() || !Is(*p, m0, 1)) return absl::InternalError("native put in Y: " + Show(p));
    auto g0 = native->Get(m0, Path::kNative);
    if (!g0.ok() || !Is(*g0, m0, 2)) return absl::InternalError("native get after the put: " + Show(g0));
    auto e1 = native->Erase(m1, Path::kNative);
    if (!e1.ok() || !Is(*e1, m1, 1)) return absl::InternalError("native erase in Y: " + Show(e1));
    auto g1 = native->Get(m1, Path::kNative);
    if (!g1.ok() || g1->has_value()) return absl::InternalError("native get after the erase: " + Show(g1));
    // A NIC get meets X's new epoch and re-reads the directory: Y.
    auto g2 = fresh->Get(m2, Path::kLoopback);
    if (!g2.ok() || !Is(*g2, m2, 1)) return absl::InternalError("NIC get that refreshes: " + Show(g2));
    auto p2 = fresh->Put(m2, V(m2, 2), Path::kLoopback);
    if (!p2.ok() || !Is(*p2, m2, 1)) return absl::InternalError("fresh NIC put in Y: " + Show(p2));
    return std::optional<Val>();
  });
  WaitDone(kLong, in_y);
  ASSERT_TRUE(in_y.done.load()) << "writers to Y waited for the split";
  EXPECT_TRUE(in_y.result.ok()) << Show(in_y.result);
  // Stale NIC clients.
  get_stale.Start(&pause.release, [&] { return stale_get->Get(m3, Path::kLoopback); });
  erase_stale.Start(&pause.release, [&] { return stale_erase->Erase(m4, Path::kLoopback); });
  put_stale.Start(&pause.release, [&] { return stale_put->Put(m5, V(m5, 2), Path::kLoopback); });
  WaitDone(milliseconds(150), get_stale);
  pause.release.Open();
  for (auto* op : {&in_y, &get_stale, &erase_stale, &put_stale, &split}) op->Join();
  ASSERT_TRUE(split.result.ok()) << split.result.status();
  EXPECT_TRUE(get_stale.result.ok() && Is(*get_stale.result, m3, 1)) << Show(get_stale.result);
  EXPECT_TRUE(erase_stale.result.ok() && Is(*erase_stale.result, m4, 1)) << Show(erase_stale.result);
  EXPECT_TRUE(put_stale.result.ok() && Is(*put_stale.result, m5, 1)) << Show(put_stale.result);
  EXPECT_FALSE(erase_stale.before_release || put_stale.before_release) << "a write to X passed the split's locks";
  auto r = g.e.NewClient(0);
  ASSERT_NE(r.client, nullptr);
  for (Path p : {Path::kNative, Path::kLoopback}) {
    auto a0 = r->Get(m0, p), a1 = r->Get(m1, p), a2 = r->Get(m2, p), a4 = r->Get(m4, p), a5 = r->Get(m5, p);
    EXPECT_TRUE(a0.ok() && Is(*a0, m0, 2)) << Show(a0);
    EXPECT_TRUE(a1.ok() && !a1->has_value()) << Show(a1);
    EXPECT_TRUE(a2.ok() && Is(*a2, m2, 2)) << Show(a2);
    EXPECT_TRUE(a4.ok() && !a4->has_value()) << Show(a4);
    EXPECT_TRUE(a5.ok() && Is(*a5, m5, 2)) << Show(a5);
  }
  ExpectMoversIntact(g, {m0, m1, m2, m4, m5});
}

// After the split: NIC clients whose directory copy is the one from before
// it (never refreshed) erase, put, insert and get keys it moved. Each must
// act on the key where it is now (Y): an erase must not report the key
// absent and leave it in Y, a put must not land a second copy in X.
TEST(HashMapGrowthRace, StaleNicClientsEraseAndPutMovedKeys) {
  Growth g = MakeGrowth();
  ASSERT_TRUE(g.e.map.has_value());
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  PutMovers(g, *w.client);
  auto s1 = g.e.NewClient(0), s2 = g.e.NewClient(0), s3 = g.e.NewClient(0), s4 = g.e.NewClient(0);
  ASSERT_TRUE(w->Put(g.trigger, V(g.trigger, 1), Path::kNative).ok());
  ASSERT_EQ(w->growth_stats().splits, 1u);
  const uint64_t m0 = g.movers[0], m1 = g.movers[1], m2 = g.movers[2], m3 = g.movers[3];
  auto e0 = s1->Erase(m0, Path::kLoopback);
  EXPECT_TRUE(e0.ok() && Is(*e0, m0, 1)) << "stale erase: " << Show(e0);
  auto g0 = w->Get(m0, Path::kNative);
  EXPECT_TRUE(g0.ok() && !g0->has_value()) << "erased key still read: " << Show(g0);
  auto p0 = s1->Put(m0, V(m0, 3), Path::kLoopback);
  EXPECT_TRUE(p0.ok() && !p0->has_value()) << Show(p0);
  auto p1 = s2->Put(m1, V(m1, 2), Path::kLoopback);
  EXPECT_TRUE(p1.ok() && Is(*p1, m1, 1)) << "stale put: " << Show(p1);
  auto i2 = s3->Insert(m2, V(m2, 2), Path::kLoopback);
  EXPECT_TRUE(i2.ok() && !*i2) << "stale insert of a present key";
  auto g3 = s4->Get(m3, Path::kLoopback);
  EXPECT_TRUE(g3.ok() && Is(*g3, m3, 1)) << "stale get: " << Show(g3);
  for (Path p : {Path::kNative, Path::kLoopback}) {
    auto r0 = s4->Get(m0, p), r1 = s4->Get(m1, p), r2 = s4->Get(m2, p);
    EXPECT_TRUE(r0.ok() && Is(*r0, m0, 3)) << Show(r0);
    EXPECT_TRUE(r1.ok() && Is(*r1, m1, 2)) << Show(r1);
    EXPECT_TRUE(r2.ok() && Is(*r2, m2, 1)) << Show(r2);
  }
  auto e1 = s4->Erase(m1, Path::kNative);
  EXPECT_TRUE(e1.ok() && Is(*e1, m1, 2)) << Show(e1);
  auto size = w->Size(0);
  EXPECT_TRUE(size.ok() && *size == g.movers.size()) << "entries: " << (size.ok() ? *size : 0);
  ExpectMoversIntact(g, {m0, m1});
}

// Two writers find the same segment full and both go for its split; the
// test holds the directory lock until both wait for it (both entered Split,
// and one split happened). The second must see in the directory that the
// segment was split meanwhile and just retry its put, not split it again.
TEST(HashMapGrowthRace, ASegmentSplitMeanwhileIsNotSplitAgain) {
  bool raced = false;
  for (int attempt = 0; attempt < 4 && !raced; ++attempt) {
    Growth g = MakeGrowth();
    ASSERT_TRUE(g.e.map.has_value());
    auto w = g.e.NewClient(0, false);
    ASSERT_NE(w.client, nullptr);
    PutMovers(g, *w.client);
    const std::vector<uint64_t> t = KeysWith(2, 1, 1, 1, 0);
    auto w1 = g.e.NewClient(0, false), w2 = g.e.NewClient(0, false);
    auto lock = locks::ALockClient::Create(g.e.cluster->node(0), nullptr);
    ASSERT_TRUE(lock.ok()) << lock.status();
    ASSERT_TRUE((*lock)->Lock(g.e.dir_lock(), Path::kNative).ok());
    Gate never;
    AsyncValue p1, p2;
    AtExit unlock([&] {
      if ((*lock)->Holds(g.e.dir_lock())) {
        EXPECT_TRUE((*lock)->Unlock(g.e.dir_lock()).ok());
      }
    });
    p1.Start(&never, [&] { return w1->Put(t[0], V(t[0], 1), Path::kNative); });
    p2.Start(&never, [&] { return w2->Put(t[1], V(t[1], 1), Path::kNative); });
    std::this_thread::sleep_for(milliseconds(200 << attempt));
    const bool early = p1.done.load() || p2.done.load();
    EXPECT_TRUE((*lock)->Unlock(g.e.dir_lock()).ok());
    p1.Join();
    p2.Join();
    EXPECT_FALSE(early) << "a put of a key whose windows are full finished without the directory lock";
    EXPECT_TRUE(p1.result.ok() && !p1.result->has_value()) << Show(p1.result);
    EXPECT_TRUE(p2.result.ok() && !p2.result->has_value()) << Show(p2.result);
    auto segs = w->SegmentsInUse(0);
    ASSERT_TRUE(segs.ok());
    EXPECT_EQ(*segs, 2u);
    raced = w1->growth_stats().splits == 1 && w2->growth_stats().splits == 1;
    if (!raced) continue;
    for (uint64_t k : t) {
      auto r = w->Get(k, Path::kNative);
      EXPECT_TRUE(r.ok() && Is(*r, k, 1)) << Show(r);
    }
    ExpectMoversIntact(g, {});
  }
  EXPECT_TRUE(raced) << "the two writers never both waited for the directory lock";
}

// ---------------------------------------------------------------------------
// Directory reads overlapping a publish. Three splits of a part of
// one-unit segments: 24 keys A (directory hash low bits 3) fill segment 0
// and move to segment 1 (split 1, depth 0 -> 1, the directory doubles); 24
// keys B (low bits 0) fill segment 0 again and key C (low bits 2) splits it
// (split 2, the directory doubles to depth 2: entry 1 and entry 3 still name
// segment 1 at local depth 1); key D (low bits 1) then splits segment 1
// (split 3, depth stays 2): A moves to segment 3, and the publish writes
// entries 1..3, entry 3 from (1, 1) to (3, 2). An entry of which only the
// lowest byte (the local depth) is new reads (1, 2): segment 1 at the new
// epoch, where no A is any more.

struct ThreeSplits {
  std::vector<uint64_t> a, b;
  uint64_t c = 0, d = 0;
};
ThreeSplits ThreeSplitKeys(int nodes) {
  ThreeSplits k;
  k.a = KeysWith(24, nodes, 1, 3, 3);
  k.b = KeysWith(24, nodes, 1, 3, 0);
  k.c = KeysWith(1, nodes, 1, 3, 2)[0];
  k.d = KeysWith(1, nodes, 1, 3, 1)[0];
  return k;
}
// Splits 1 and 2, natively.
void FirstTwoSplits(Growth& g, const ThreeSplits& k, typename GrowMap::Client& w) {
  for (uint64_t x : k.a) ASSERT_TRUE(w.Put(x, V(x, 1), Path::kNative).ok());
  for (uint64_t x : k.b) ASSERT_TRUE(w.Put(x, V(x, 1), Path::kNative).ok());
  ASSERT_TRUE(w.Put(k.c, V(k.c, 1), Path::kNative).ok());
  ASSERT_EQ(w.growth_stats().splits, 2u);
  EXPECT_EQ(EntryDepth(g.e.entries()[3].Load()), 1);
  EXPECT_EQ(g.e.dir()->depth.Load(), 2u);
}

// Split 3 by a NIC (loopback) splitter whose publish lands a byte at a time
// and is paused right after the first byte of entry 3: version odd, entry 3
// (1, 2). A native reader (seqlock in place) and a remote reader on node 1
// (whose copy names segment 1 at depth 1, so it meets the new epoch and
// re-reads the directory) must not use the directory until the publish is
// done.
TEST(HashMapDirectoryRace, ReadersWaitOutAPublishPausedMidEntry) {
  Growth g = MakeGrowth(/*nodes=*/2);
  ASSERT_TRUE(g.e.map.has_value());
  const ThreeSplits k = ThreeSplitKeys(g.nodes);
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  FirstTwoSplits(g, k, *w.client);
  auto splitter = g.e.NewClient(0), nic_reader = g.e.NewClient(1), native_reader = g.e.NewClient(0, false);
  ASSERT_TRUE(splitter.client != nullptr && nic_reader.client != nullptr && native_reader.client != nullptr);
  ASSERT_TRUE(nic_reader->RefreshDirectory(0).ok());
  SplitPause pause;
  std::atomic<int> transfers{0};
  std::atomic<bool> paused_once{false};
  rdma::soft::SoftDevice* dev = g.e.dev0;
  PauseScope scope(&pause);
  AsyncValue split, get_native, get_nic;
  AtExit let_go([&] {
    pause.release.Open();
    dev->faults().SetCopyHook(nullptr);
    dev->SetByteGranularCopies(false);
  });
  pause.before_publish = [&] {
    dev->SetByteGranularCopies(true);
    dev->faults().SetCopyHook([&](uint64_t offset) {
      if (paused_once.load()) return;
      if (offset == 0) transfers.fetch_add(1);
      // Transfer 1: the version (odd); transfer 2: entries 1..3, entry 3 at byte 16.
      if (transfers.load() == 2 && offset == 16 && !paused_once.exchange(true)) {
        pause.reached.Open();
        pause.release.Wait(kLong);
      }
    });
  };
  split.Start(&pause.release, [&] { return splitter->Put(k.d, V(k.d, 1), Path::kLoopback); });
  ASSERT_TRUE(pause.reached.Wait(kLong));
  ASSERT_EQ(g.e.dir()->version.Load() & 1, 1u);
  ASSERT_EQ(g.e.entries()[3].Load(), DirEntry(1, 2)) << "the publish did not pause mid-entry";
  get_native.Start(&pause.release, [&] { return native_reader->Get(k.a[0], Path::kNative); });
  get_nic.Start(&pause.release, [&] { return nic_reader->Get(k.a[1], Path::kRemote); });
  // The NIC reader retries its directory READ for at most 2^16 doorbells:
  // release well before.
  WaitDone(milliseconds(80), get_native, get_nic);
  pause.release.Open();
  for (auto* op : {&get_native, &get_nic, &split}) op->Join();
  dev->faults().SetCopyHook(nullptr);
  dev->SetByteGranularCopies(false);
  ASSERT_TRUE(split.result.ok()) << split.result.status();
  EXPECT_EQ(splitter->growth_stats().splits, 1u);
  EXPECT_TRUE(get_native.result.ok() && Is(*get_native.result, k.a[0], 1)) << Show(get_native.result);
  EXPECT_TRUE(get_nic.result.ok() && Is(*get_nic.result, k.a[1], 1)) << Show(get_nic.result);
  EXPECT_EQ(g.e.entries()[3].Load(), DirEntry(3, 2));
}

// A remote client on node 1 re-reads node 0's directory (one doorbell:
// version, depth, entries, version). Its READ of the entries is paused, bytes copied last to first,
// after entry 3's upper seven bytes (segment 1); meanwhile split 3 runs
// natively and publishes; then the READ goes on (entry 3's low byte is now
// 2) and the second version READ sees the new version. The copy mixes two
// directories and must be read again.
TEST(HashMapDirectoryRace, NicDirectoryReadAcrossAPublishIsRetried) {
  Growth g = MakeGrowth(/*nodes=*/2);
  ASSERT_TRUE(g.e.map.has_value());
  const ThreeSplits k = ThreeSplitKeys(g.nodes);
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  FirstTwoSplits(g, k, *w.client);
  auto reader = g.e.NewClient(1);
  ASSERT_NE(reader.client, nullptr);
  ASSERT_TRUE(reader->RefreshDirectory(0).ok());  // depth 2: four entries
  rdma::soft::SoftDevice* dev = g.e.dev0;
  Gate reached, release;
  std::atomic<int> calls{0};
  std::atomic<bool> paused_once{false};
  std::atomic<uint64_t> pause_offset{0};
  Async<absl::Status> refresh;
  AtExit let_go([&] {
    release.Open();
    dev->faults().SetCopyHook(nullptr);
    dev->SetByteGranularCopies(false);
    dev->SetByteCopiesDescending(false);
  });
  dev->SetByteGranularCopies(true);
  dev->SetByteCopiesDescending(true);
  // Version: 8 bytes, depth and segments: 16, entries: 32 (offsets 31 down).
  dev->faults().SetCopyHook([&](uint64_t offset) {
    if (paused_once.load()) return;
    if (calls.fetch_add(1) + 1 == 8 + 16 + 7 && !paused_once.exchange(true)) {
      pause_offset.store(offset);
      reached.Open();
      release.Wait(kLong);
    }
  });
  refresh.Start(&release, [&] { return reader->RefreshDirectory(0); });
  ASSERT_TRUE(reached.Wait(kLong));
  EXPECT_EQ(pause_offset.load(), 25u);
  ASSERT_TRUE(w->Put(k.d, V(k.d, 1), Path::kNative).ok());  // split 3, published
  ASSERT_EQ(w->growth_stats().splits, 3u);
  release.Open();
  refresh.Join();
  dev->faults().SetCopyHook(nullptr);
  dev->SetByteGranularCopies(false);
  dev->SetByteCopiesDescending(false);
  ASSERT_TRUE(refresh.result.ok()) << refresh.result;
  for (size_t i : {0, 1, 2, 3}) {
    auto r = reader->Get(k.a[i], Path::kRemote);
    EXPECT_TRUE(r.ok() && Is(*r, k.a[i], 1)) << Show(r);
  }
}

// A read of the directory that spans 128 publishes sees the same one-byte
// version around an older depth and newer entries. Here: after split 1 (the
// directory doubled to depth 1, entry 0 names segment 0 at local depth 1),
// the depth word is set back to 0 for the first directory READ of a NIC
// client on node 1 (the copy hook restores it once that doorbell's last
// READ is done). An entry deeper than the depth read with it must not be taken.
TEST(HashMapDirectoryRace, NicDirectoryReadRefusesAnEntryDeeperThanItsDepth) {
  Growth g = MakeGrowth(/*nodes=*/2);
  ASSERT_TRUE(g.e.map.has_value());
  auto w = g.e.NewClient(0, false);
  ASSERT_NE(w.client, nullptr);
  PutMovers(g, *w.client);
  ASSERT_TRUE(w->Put(g.trigger, V(g.trigger, 1), Path::kNative).ok());
  ASSERT_EQ(g.e.dir()->depth.Load(), 1u);
  auto reader = g.e.NewClient(1);  // its copy of node 0's: the initial directory, depth 0
  ASSERT_NE(reader.client, nullptr);
  DirectoryHeader* h = g.e.dir();
  h->depth.Store(0);
  std::atomic<int> calls{0};
  AtExit unhook([&] { g.e.dev0->faults().SetCopyHook(nullptr); });
  // Version, depth and segments (2 words), entry 0, version: 5 words.
  g.e.dev0->faults().SetCopyHook([&](uint64_t) {
    if (calls.fetch_add(1) + 1 == 5) h->depth.Store(1);
  });
  absl::Status st = reader->RefreshDirectory(0);
  g.e.dev0->faults().SetCopyHook(nullptr);
  h->depth.Store(1);
  ASSERT_TRUE(st.ok()) << st;
  for (size_t i = 0; i < 4; ++i) {
    auto r = reader->Get(g.movers[i], Path::kRemote);
    EXPECT_TRUE(r.ok() && Is(*r, g.movers[i], 1)) << Show(r);
  }
}

// The native seqlock read (native_path.h), against a NIC publish that tears
// an entry: the version odd and entry 3 half written, the reader must wait;
// and a read whose version changed under it (a publish ran between its two
// loads of the version) must be repeated.
struct FakeDirectory {
  DirectoryHeader h;
  rdma::PlainWord more[7];  // entry[] has 8 entries here
};

TEST(HashMapDirectoryRace, NativeLookupWaitsWhileThePublishIsInProgress) {
  auto* d = new FakeDirectory{};
  rdma::PlainWord* entries = d->h.entry;
  const uint64_t before[4] = {DirEntry(0, 2), DirEntry(1, 2), DirEntry(2, 2), DirEntry(1, 1)};
  for (size_t i = 0; i < 4; ++i) entries[i].Store(before[i]);
  d->h.depth.Store(2);
  d->h.version.Store(1);           // a publish in progress
  entries[3].Store(DirEntry(1, 2));  // entry 3 with only its low byte new
  std::atomic<bool> done{false};
  uint64_t e = 0;
  absl::Status st;
  std::thread reader([&] {
    st = NativeDirLookup(d->h, entries, /*max_depth=*/3, /*dir=*/3, &e);
    done.store(true);
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(done.load()) << "took entry " << EntrySegment(e) << "/" << EntryDepth(e)
                            << " while the version was odd";
  entries[3].Store(DirEntry(3, 2));
  d->h.version.Store(2);
  reader.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(e, DirEntry(3, 2));
  delete d;
}

TEST(HashMapDirectoryRace, NativeSeqlockReadRepeatsAReadThatAPublishOverlapped) {
  auto* d = new FakeDirectory{};
  rdma::PlainWord* entries = d->h.entry;
  entries[1].Store(DirEntry(1, 1));
  entries[3].Store(DirEntry(1, 1));
  d->h.depth.Store(2);
  d->h.version.Store(4);
  int calls = 0;
  uint64_t e = 0;
  absl::Status st = NativeSeqlockRead(d->h, [&] {
    ++calls;
    const int depth = static_cast<int>(d->h.depth.Load());
    if (calls == 1) {  // a NIC publish starts after the reader's first version load
      d->h.version.Store(5);
      entries[3].Store(DirEntry(1, 2));  // entry 3's low byte landed
    }
    e = entries[3 & ((uint64_t{1} << depth) - 1)].Load();
    if (calls == 1) {  // ... and ends before its second
      entries[1].Store(DirEntry(1, 2));
      entries[3].Store(DirEntry(3, 2));
      d->h.version.Store(6);
    }
    return EntryFits(e, depth);
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(e, DirEntry(3, 2));
  delete d;
}

// The segment count through the NIC (version, count, version: one doorbell
// of three one-word READs), from a client on node 1. The copy hook plays a
// publish against it: the count is garbage while the version is odd.
class SegmentsSeqlock : public ::testing::Test {
 protected:
  void SetUp() override {
    e_ = MakeEnv<Map>(3, 24, /*nodes=*/2);
    ASSERT_TRUE(e_.map.has_value());
    remote_ = e_.NewClient(1);
    ASSERT_NE(remote_.client, nullptr);
    h_ = e_.dir();
  }
  // SegmentsInUse(0) with `hook(call)` run after each word node 0's NIC copies.
  absl::StatusOr<size_t> Read(std::function<void(int)> hook) {
    std::atomic<int> calls{0};
    e_.dev0->faults().SetCopyHook([&](uint64_t) { hook(calls.fetch_add(1) + 1); });
    auto r = remote_->SegmentsInUse(0);
    e_.dev0->faults().SetCopyHook(nullptr);
    return r;
  }
  Env<Map> e_;
  Env<Map>::Handle remote_;
  DirectoryHeader* h_ = nullptr;
};

TEST_F(SegmentsSeqlock, OddVersionIsReadAgain) {
  h_->version.Store(1);
  h_->segments.Store(0);
  auto r = Read([&](int call) {
    if (call == 3) {  // after the first doorbell: the publish ends
      h_->segments.Store(1);
      h_->version.Store(2);
    }
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 1u);
}

TEST_F(SegmentsSeqlock, VersionThatMovedIsReadAgain) {
  auto r = Read([&](int call) {
    if (call == 1) {  // after the first version READ: a publish starts
      h_->version.Store(1);
      h_->segments.Store(0);
    } else if (call == 2) {  // after the count READ: it ends
      h_->segments.Store(1);
      h_->version.Store(2);
    }
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 1u);
}

// ---------------------------------------------------------------------------
// Inconsistent under the lock: DataLoss, never an answer.

// A slot whose checksum does not match (what only a writer that bypassed the
// lock leaves): a NIC writer of a key in that window, and a reader of the
// key (after its optimistic reads, under the locks), report DataLoss.
TEST(HashMapUnderLock, TornSlotIsDataLoss) {
  Env<Map> e = MakeEnv<Map>(3, 3);
  ASSERT_TRUE(e.map.has_value());
  auto c = e.NewClient(0);
  ASSERT_NE(c.client, nullptr);
  const uint64_t k = 5, other = 6;
  ASSERT_TRUE(c->Put(k, V(k, 1), Path::kNative).ok());
  Unit<Val>& u = e.units()[0];
  int slot = -1;
  for (size_t s = 0; s < kSlotsPerUnit; ++s) {
    if (u.slots[s].w[L::kKeyWord].Load() == k) slot = static_cast<int>(s);
  }
  ASSERT_GE(slot, 0);
  u.slots[slot].w[L::kValueWord].Store(u.slots[slot].w[L::kValueWord].Load() ^ 1);
  auto p = c->Put(other, V(other, 1), Path::kLoopback);
  EXPECT_TRUE(absl::IsDataLoss(p.status())) << Show(p);
  auto g = c->Get(k, Path::kLoopback);
  EXPECT_TRUE(absl::IsDataLoss(g.status())) << Show(g);
  EXPECT_GT(c->read_stats().locked_reads, 0u);
}

// A split reads the old segment under all its unit locks: a slot there with a
// bad checksum, or of another epoch than the segment's, is DataLoss.
TEST(HashMapUnderLock, SplitOfAnInconsistentSegmentIsDataLoss) {
  {
    Growth g = MakeGrowth();
    ASSERT_TRUE(g.e.map.has_value());
    auto w = g.e.NewClient(0, false);
    ASSERT_NE(w.client, nullptr);
    PutMovers(g, *w.client);
    auto& s = g.e.units()[0].slots[5];
    s.w[L::kValueWord].Store(s.w[L::kValueWord].Load() ^ 1);
    auto p = w->Put(g.trigger, V(g.trigger, 1), Path::kNative);
    EXPECT_TRUE(absl::IsDataLoss(p.status())) << "bad checksum: " << Show(p);
  }
  {
    // Segments of two units; 24 keys with both candidates in unit 0 fill it,
    // and unit 1 (no key's window here) holds a slot of epoch 1.
    Env<GrowMap> e = MakeEnv<GrowMap>(6, 48);
    ASSERT_TRUE(e.map.has_value());
    ASSERT_EQ(e.map->geometry().segment_units, 2u);
    ASSERT_EQ(e.map->geometry().base_depth, 0);
    auto w = e.NewClient(0, false);
    ASSERT_NE(w.client, nullptr);
    for (uint64_t x : KeysWith(24, 1, 2, 0, 0, /*unit=*/0)) ASSERT_TRUE(w->Put(x, V(x, 1), Path::kNative).ok());
    uint64_t t[L::kWords] = {};
    t[L::kStateWord] = L::Restamped(0, 1, false);
    t[L::kChecksumWord] = L::Checksum(t);
    for (size_t i = 0; i < L::kWords; ++i) e.units()[1].slots[0].w[i].Store(t[i]);
    const uint64_t trigger = KeysWith(1, 1, 2, 0, 0, 0, 1000000)[0];
    auto p = w->Put(trigger, V(trigger, 1), Path::kNative);
    EXPECT_TRUE(absl::IsDataLoss(p.status())) << "slot of another epoch: " << Show(p);
  }
}

// A directory entry naming a segment past the pool is DataLoss before
// anything is read through it.
TEST(HashMapUnderLock, DirectoryEntryOutOfRangeIsDataLoss) {
  // Room for 32 segments: the directory's entries take 2 KiB, so "segment
  // 32" (the first past the pool) would be read inside the directory.
  Env<Map> e = MakeEnv<Map>(3, 96);
  ASSERT_TRUE(e.map.has_value());
  ASSERT_EQ(e.map->geometry().max_segments, 32u);
  ASSERT_GE(e.map->geometry().max_depth, 8);
  auto c = e.NewClient(0, false);
  ASSERT_NE(c.client, nullptr);
  e.entries()[0].Store(DirEntry(e.map->geometry().max_segments, 0));
  auto g = c->Get(5, Path::kNative);
  EXPECT_TRUE(absl::IsDataLoss(g.status())) << Show(g);
}

}  // namespace
}  // namespace structures::hash_map_internal
