// Properties specific to the software RNIC: the hardware facts of docs/design.md §3
// that later let mutants be caught, and its fault hooks.

#include <atomic>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"

namespace rdma {
namespace {

std::unique_ptr<Cluster> SoftCluster(int nodes, bool byte_granular = false) {
  ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = nodes;
  o.node.arena_bytes = 4 << 20;
  o.fabric.kind = FabricKind::kSoft;
  o.fabric.soft_byte_granular_copies = byte_granular;
  auto c = Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

soft::SoftDevice& Soft(Cluster& c, NodeId n) { return *soft::AsSoftDevice(c.node(n).device()); }

TEST(SoftNic, NicAtomicsAreNotAtomicWithCpuAtomics) {
  // Pause the NIC inside an RDMA CAS (after its read, before its write), run
  // a CPU CAS on the same word, resume: both "succeed" and one update is lost.
  auto cluster = SoftCluster(2);
  RemotePtr word = *cluster->node(0).Allocate(8);
  auto* cpu_view = reinterpret_cast<std::atomic<uint64_t>*>(word.local<uint64_t>());
  Soft(*cluster, 0).faults().PauseNextAtomic();

  uint64_t nic_old = ~uint64_t{0};
  // jthread: joined even when an ASSERT below returns early (no terminate).
  std::jthread remote([&] {
    auto s = cluster->NewSession(1);
    ASSERT_TRUE(s.ok());
    auto r = (*s)->CompareAndSwap(word, 0, 100);  // RDMA CAS 0 -> 100
    ASSERT_TRUE(r.ok());
    nic_old = *r;
  });
  ASSERT_TRUE(Soft(*cluster, 0).faults().WaitUntilAtomicPaused(std::chrono::seconds(5)));
  uint64_t expected = 0;
  const bool cpu_won = cpu_view->compare_exchange_strong(expected, 7);  // CPU CAS 0 -> 7
  Soft(*cluster, 0).faults().ResumeAtomic();
  remote.join();

  EXPECT_TRUE(cpu_won);
  EXPECT_EQ(nic_old, 0u);  // the NIC CAS also saw 0 and "succeeded"
  EXPECT_EQ(cpu_view->load(), 100u) << "the CPU's update was lost";
}

TEST(SoftNic, NicAtomicsAreAtomicAmongThemselvesEvenWhenPaused) {
  auto cluster = SoftCluster(3);
  RemotePtr word = *cluster->node(0).Allocate(8);
  Soft(*cluster, 0).faults().PauseNextAtomic();
  std::jthread first([&] {
    auto s = cluster->NewSession(1);
    ASSERT_TRUE((*s)->FetchAndAdd(word, 1).ok());
  });
  ASSERT_TRUE(Soft(*cluster, 0).faults().WaitUntilAtomicPaused(std::chrono::seconds(5)));
  std::jthread second([&] {
    auto s = cluster->NewSession(2);
    ASSERT_TRUE((*s)->FetchAndAdd(word, 10).ok());  // waits for the NIC-side lock
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Soft(*cluster, 0).faults().ResumeAtomic();
  first.join();
  second.join();
  EXPECT_EQ(__atomic_load_n(word.local<uint64_t>(), __ATOMIC_ACQUIRE), 11u);
}

TEST(SoftNic, AnUnresumedPausedAtomicContinuesAfterTheDeadline) {
  // A test that never calls ResumeAtomic() (say, it failed first) must not
  // hang: the NIC gives up the pause after kMaxAtomicPause.
  auto cluster = SoftCluster(2);
  RemotePtr word = *cluster->node(0).Allocate(8);
  Soft(*cluster, 0).faults().PauseNextAtomic();
  auto s = cluster->NewSession(1, {.completion_timeout = std::chrono::seconds(30)});
  ASSERT_TRUE(s.ok());
  const auto start = std::chrono::steady_clock::now();
  auto r = (*s)->FetchAndAdd(word, 5);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 0u);
  EXPECT_EQ(__atomic_load_n(word.local<uint64_t>(), __ATOMIC_ACQUIRE), 5u);
  EXPECT_GE(waited, soft::FaultInjector::kMaxAtomicPause - std::chrono::milliseconds(100));
  EXPECT_LT(waited, soft::FaultInjector::kMaxAtomicPause + std::chrono::seconds(10));
}

TEST(SoftNic, MultiWordReadTearsDeterministically) {
  // A writer changes the source between the NIC's word copies.
  auto cluster = SoftCluster(2);
  RemotePtr buf = *cluster->node(0).Allocate(64);
  auto* words = buf.local<uint64_t>();
  for (int i = 0; i < 8; ++i) __atomic_store_n(words + i, 1, __ATOMIC_RELEASE);
  Soft(*cluster, 0).faults().SetCopyHook([words](uint64_t index) {
    if (index == 3) {
      for (int i = 0; i < 8; ++i) __atomic_store_n(words + i, 2, __ATOMIC_RELEASE);
    }
  });
  auto s = cluster->NewSession(1);
  uint64_t got[8];
  ASSERT_TRUE((*s)->Read(buf, got, 64).ok());
  Soft(*cluster, 0).faults().SetCopyHook(nullptr);
  for (int i = 0; i <= 3; ++i) EXPECT_EQ(got[i], 1u) << i;
  for (int i = 4; i < 8; ++i) EXPECT_EQ(got[i], 2u) << i;
}

TEST(SoftNic, UnalignedTransfersCopyWholeWordsAsWords) {
  // A 20-byte transfer at arena offset +4 covers [4, 24): 4 head bytes, then
  // the aligned words [8, 16) and [16, 24). Each whole word is one access (the
  // hook fires per word); only the head moves byte by byte.
  auto cluster = SoftCluster(2);
  RemotePtr buf = *cluster->node(0).Allocate(32);
  auto* words = buf.local<uint64_t>();
  auto fill = [words](uint8_t b) {
    for (int i = 0; i < 4; ++i) __atomic_store_n(words + i, b * 0x0101010101010101ull, __ATOMIC_RELEASE);
  };
  fill(1);
  std::vector<uint64_t> hooked;
  Soft(*cluster, 0).faults().SetCopyHook([&](uint64_t index) {
    hooked.push_back(index);
    if (index == 0) fill(2);  // changes memory between the two words
  });
  auto s = cluster->NewSession(1);
  ASSERT_TRUE(s.ok());
  uint8_t got[20];
  ASSERT_TRUE((*s)->Read(buf + 4, got, 20).ok());
  EXPECT_EQ(hooked, (std::vector<uint64_t>{0, 1}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(got[i], 1) << i;   // head + word 0
  for (int i = 12; i < 20; ++i) EXPECT_EQ(got[i], 2) << i;  // word 1
  // 12-byte WRITE at +12 covers [12, 24): 4 head bytes and one word; a
  // 12-byte WRITE at +8 covers one word and 4 tail bytes.
  hooked.clear();
  Soft(*cluster, 0).faults().SetCopyHook([&](uint64_t index) { hooked.push_back(index); });
  const uint8_t payload[12] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
  ASSERT_TRUE((*s)->Write(buf + 12, payload, 12).ok());
  EXPECT_EQ(hooked, (std::vector<uint64_t>{0}));
  hooked.clear();
  ASSERT_TRUE((*s)->Write(buf + 8, payload, 12).ok());
  EXPECT_EQ(hooked, (std::vector<uint64_t>{0}));
  Soft(*cluster, 0).faults().SetCopyHook(nullptr);
  EXPECT_EQ(__atomic_load_n(words + 1, __ATOMIC_ACQUIRE), 0x0909090909090909ull);
  EXPECT_EQ(__atomic_load_n(words + 2, __ATOMIC_ACQUIRE), 0x0909090909090909ull);
  EXPECT_EQ(__atomic_load_n(words + 0, __ATOMIC_ACQUIRE), 0x0202020202020202ull);
  EXPECT_EQ(__atomic_load_n(words + 3, __ATOMIC_ACQUIRE), 0x0202020202020202ull);
}

TEST(SoftNic, MultiWordReadsTearWhenRacingAWriter) {
  // No hook: a CPU writer racing RDMA READs of a 4 KiB block must eventually
  // produce a READ whose words disagree. Each word is never torn itself.
  auto cluster = SoftCluster(2);
  constexpr int kWords = 512;
  RemotePtr buf = *cluster->node(0).Allocate(kWords * 8);
  auto* words = buf.local<uint64_t>();
  // Stopped through its stop_token, also when an ASSERT below returns early.
  std::jthread writer([&](std::stop_token stop) {
    for (uint64_t v = 1; !stop.stop_requested(); v = v % 255 + 1) {
      for (int i = 0; i < kWords; ++i) __atomic_store_n(words + i, v * 0x0101010101010101ull, __ATOMIC_RELEASE);
    }
  });
  auto s = cluster->NewSession(1);
  std::vector<uint64_t> got(kWords);
  bool torn = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!torn && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE((*s)->Read(buf, got.data(), kWords * 8).ok());
    for (int i = 0; i < kWords; ++i) {
      ASSERT_EQ(got[i], (got[i] & 0xff) * 0x0101010101010101ull) << "a single word tore";
      if (got[i] != got[0]) torn = true;
    }
  }
  writer.request_stop();
  writer.join();
  EXPECT_TRUE(torn) << "no torn multi-word READ observed in 20 s";
}

// --- Byte-granular copies (SoftDeviceOptions::byte_granular_copies): rxe's
// torn 8-byte WRITE (tests/verbs/README.md, "rxe torn WRITE") on the host.

// Parks the NIC inside a copy of node 0's memory after copy-hook index
// `stop_after` until the test has looked at memory, so a CPU access can land
// at an exact point of the transfer. The hook runs on whichever thread
// executes the WR; the test thread is a separate CPU thread.
class CopyPause {
 public:
  CopyPause(soft::SoftDevice& dev, uint64_t stop_after) : dev_(dev) {
    dev_.faults().SetCopyHook([this, stop_after](uint64_t index) {
      std::unique_lock<std::mutex> l(mu_);
      indexes_.push_back(index);
      if (index != stop_after) return;
      paused_ = true;
      cv_.notify_all();
      // Bounded, so a failing test cannot hang the NIC.
      cv_.wait_for(l, std::chrono::seconds(10), [this] { return resumed_; });
    });
  }
  ~CopyPause() { dev_.faults().SetCopyHook(nullptr); }
  bool WaitPaused() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [this] { return paused_; });
  }
  void Resume() {
    std::lock_guard<std::mutex> l(mu_);
    resumed_ = true;
    cv_.notify_all();
  }
  std::vector<uint64_t> indexes() {
    std::lock_guard<std::mutex> l(mu_);
    return indexes_;
  }

 private:
  soft::SoftDevice& dev_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false, resumed_ = false;
  std::vector<uint64_t> indexes_;
};

constexpr uint64_t kOld = 0x1111111111111111ull, kNew = 0x2222222222222222ull;

// What a CPU load on node 0 saw inside one 8-byte WRITE from node 1.
struct LoadInsideWrite {
  bool paused = false;            // the NIC stopped at the asked-for point
  uint64_t seen = 0;              // the CPU load's value while it was stopped
  std::vector<uint64_t> indexes;  // every copy-hook index of the WRITE
};

// Stores kOld into `word` (on node 0), then WRITEs kNew into it from node 1
// with node 0's NIC parked after copy-hook index `stop_after`, and loads the
// word with the CPU while it is parked.
LoadInsideWrite CpuLoadInsideWrite(Cluster& cluster, RemotePtr word, uint64_t stop_after) {
  auto* cpu_view = word.local<uint64_t>();
  __atomic_store_n(cpu_view, kOld, __ATOMIC_RELEASE);
  LoadInsideWrite r;
  CopyPause pause(Soft(cluster, 0), stop_after);
  {
    std::jthread writer([&] {
      auto s = cluster.NewSession(1);
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE((*s)->Write64(word, kNew).ok());
    });
    r.paused = pause.WaitPaused();
    r.seen = __atomic_load_n(cpu_view, __ATOMIC_ACQUIRE);
    pause.Resume();
  }  // joins the writer
  r.indexes = pause.indexes();
  return r;
}

TEST(SoftNic, ByteGranularWriteTearsAnAlignedWordForACpuLoad) {
  // The successor's one 8-byte WRITE into a descriptor's `next`, stopped
  // after its 4th byte (index 3): a CPU load on the target node sees the low
  // four bytes new and the high four old (little-endian, ascending copy).
  auto cluster = SoftCluster(2, /*byte_granular=*/true);
  ASSERT_TRUE(Soft(*cluster, 0).byte_granular_copies());
  RemotePtr word = *cluster->node(0).Allocate(8);
  const LoadInsideWrite r = CpuLoadInsideWrite(*cluster, word, /*stop_after=*/3);
  ASSERT_TRUE(r.paused);
  EXPECT_EQ(r.seen, 0x1111111122222222ull) << std::hex << r.seen;
  EXPECT_EQ(r.indexes, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));  // one call per byte
  EXPECT_EQ(__atomic_load_n(word.local<uint64_t>(), __ATOMIC_ACQUIRE), kNew);
}

TEST(SoftNic, ByteGranularReadRacingACpuStoreReturnsATornWord) {
  // The mirror image: a CPU store between the bytes of a READ.
  auto cluster = SoftCluster(2, /*byte_granular=*/true);
  RemotePtr word = *cluster->node(0).Allocate(8);
  auto* cpu_view = word.local<uint64_t>();
  __atomic_store_n(cpu_view, kOld, __ATOMIC_RELEASE);
  uint64_t got = 0;
  {
    CopyPause pause(Soft(*cluster, 0), /*stop_after=*/5);
    std::jthread reader([&] {
      auto s = cluster->NewSession(1);
      ASSERT_TRUE(s.ok());
      auto r = (*s)->Read64(word);
      ASSERT_TRUE(r.ok()) << r.status();
      got = *r;
    });
    ASSERT_TRUE(pause.WaitPaused());
    __atomic_store_n(cpu_view, kNew, __ATOMIC_RELEASE);
    pause.Resume();
  }
  EXPECT_EQ(got, 0x2222111111111111ull) << std::hex << got;
}

TEST(SoftNic, DescendingByteCopiesLandTheHighBytesFirst) {
  // The adversarial order (byte_copies_descending): stopped after its 4th
  // byte, the WRITE has placed the high four bytes; the hook still reports
  // byte offsets (7, 6, 5, 4, ...).
  auto cluster = SoftCluster(2, /*byte_granular=*/true);
  Soft(*cluster, 0).SetByteCopiesDescending(true);
  RemotePtr word = *cluster->node(0).Allocate(8);
  const LoadInsideWrite r = CpuLoadInsideWrite(*cluster, word, /*stop_after=*/4);
  ASSERT_TRUE(r.paused);
  EXPECT_EQ(r.seen, 0x2222222211111111ull) << std::hex << r.seen;
  EXPECT_EQ(r.indexes, (std::vector<uint64_t>{7, 6, 5, 4, 3, 2, 1, 0}));
}

TEST(SoftNic, DefaultModeNeverTearsAnAlignedWord) {
  // Same WRITE and READ as above without byte_granular_copies: the hook fires
  // once per word, after the word moved as one access, so neither a CPU load
  // nor a CPU store can fall between its bytes.
  auto cluster = SoftCluster(2);
  ASSERT_FALSE(Soft(*cluster, 0).byte_granular_copies());
  RemotePtr word = *cluster->node(0).Allocate(8);
  auto* cpu_view = word.local<uint64_t>();
  const LoadInsideWrite r = CpuLoadInsideWrite(*cluster, word, /*stop_after=*/0);
  ASSERT_TRUE(r.paused);
  EXPECT_EQ(r.seen, kNew);                           // already whole
  EXPECT_EQ(r.indexes, (std::vector<uint64_t>{0}));  // no point inside the word
  // And racing without a hook: a CPU reader polling the word while another
  // node rewrites it sees only whole values.
  auto s = cluster->NewSession(1);
  ASSERT_TRUE(s.ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::jthread poller([&] {
    while (!stop.load(std::memory_order_acquire)) {
      const uint64_t v = __atomic_load_n(cpu_view, __ATOMIC_ACQUIRE);
      if (v != kOld && v != kNew) bad.store(v, std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE((*s)->Write64(word, i % 2 ? kOld : kNew).ok());
  stop.store(true, std::memory_order_release);
  poller.join();
  EXPECT_EQ(bad.load(), 0u) << std::hex << bad.load();
}

TEST(SoftNic, ByteGranularModeKeepsNicAtomicsWholeAndCanBeToggled) {
  // CAS/FAA never go through the byte copy (no hook calls) and stay 8-byte
  // atomic among NIC atomics; SetByteGranularCopies flips one device.
  auto cluster = SoftCluster(3, /*byte_granular=*/true);
  RemotePtr word = *cluster->node(0).Allocate(8);
  std::atomic<int> hook_calls{0};
  Soft(*cluster, 0).faults().SetCopyHook([&](uint64_t) { hook_calls.fetch_add(1); });
  {
    std::vector<std::jthread> adders;
    for (NodeId n : {1, 2}) {
      adders.emplace_back([&, n] {
        auto s = cluster->NewSession(n);
        ASSERT_TRUE(s.ok());
        for (int i = 0; i < 200; ++i) ASSERT_TRUE((*s)->FetchAndAdd(word, 0x0101010101010101ull).ok());
      });
    }
  }
  EXPECT_EQ(__atomic_load_n(word.local<uint64_t>(), __ATOMIC_ACQUIRE), 400 * 0x0101010101010101ull);
  EXPECT_EQ(hook_calls.load(), 0);
  auto s = cluster->NewSession(1);
  ASSERT_TRUE((*s)->Write64(word, 1).ok());
  EXPECT_EQ(hook_calls.exchange(0), 8);
  Soft(*cluster, 0).SetByteGranularCopies(false);
  ASSERT_TRUE((*s)->Write64(word, 2).ok());
  EXPECT_EQ(hook_calls.load(), 1);
  Soft(*cluster, 0).faults().SetCopyHook(nullptr);
}

TEST(SoftNic, FailNthOperationFailsExactlyThatOperation) {
  auto cluster = SoftCluster(2);
  RemotePtr w = *cluster->node(1).Allocate(8);
  auto s = cluster->NewSession(0);
  Soft(*cluster, 0).faults().FailNthOperation(3);
  EXPECT_TRUE((*s)->FetchAndAdd(w, 1).ok());
  EXPECT_TRUE((*s)->FetchAndAdd(w, 1).ok());
  absl::Status third = (*s)->FetchAndAdd(w, 1).status();
  EXPECT_EQ(third.code(), absl::StatusCode::kInternal) << third;
  EXPECT_NE(third.message().find("remote operation error"), std::string::npos) << third;
  ASSERT_TRUE((*s)->Reconnect(1).ok());
  EXPECT_EQ(*(*s)->FetchAndAdd(w, 1), 2u);  // the failed FAA never ran
}

TEST(SoftNic, KilledNodeFailsOperationsAsUnavailable) {
  auto cluster = SoftCluster(3);
  RemotePtr on1 = *cluster->node(1).Allocate(8);
  RemotePtr on2 = *cluster->node(2).Allocate(8);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE((*s)->Write64(on1, 1).ok());
  Soft(*cluster, 1).Kill();
  absl::Status st = (*s)->Write64(on1, 2);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  // The cluster has declared it dead, and the session says so.
  EXPECT_NE(st.message().find("node 1 is gone"), std::string::npos) << st;
  // Other nodes are unaffected.
  EXPECT_TRUE((*s)->Write64(on2, 3).ok());
  // A session living on the dead node cannot do anything.
  auto dead = cluster->NewSession(1);
  if (dead.ok()) {
    EXPECT_FALSE((*dead)->Write64(on2, 4).ok());
  }
}

TEST(SoftNic, FailedReconnectLeavesACleanErrorNotANullQp) {
  auto cluster = SoftCluster(3);
  RemotePtr on1 = *cluster->node(1).Allocate(8);
  RemotePtr on2 = *cluster->node(2).Allocate(8);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE(s.ok());
  Soft(*cluster, 1).Kill();
  EXPECT_FALSE((*s)->Write64(on1, 1).ok());
  absl::Status rc = (*s)->Reconnect(1);
  ASSERT_FALSE(rc.ok()) << "reconnecting to a dead node must fail";
  // Every path to node 1 now reports the failed Reconnect instead of
  // dereferencing the QP it no longer has.
  for (int i = 0; i < 2; ++i) {
    absl::Status st = (*s)->Write64(on1, 2);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find("not connected"), std::string::npos) << st;
    EXPECT_NE(st.message().find("last Reconnect failed"), std::string::npos) << st;
  }
  uint64_t v = 0;
  EXPECT_EQ(Batch(**s, 1).Read(on1, &v, 8).Execute().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*s)->queue_pair(1).state(), QpState::kError);
  EXPECT_EQ((*s)->queue_pair(1).Post({}).code(), absl::StatusCode::kFailedPrecondition);
  // The session and the other peers are healthy.
  EXPECT_TRUE((*s)->Write64(on2, 3).ok());
  EXPECT_TRUE((*s)->Drain().ok());
}

// What the NIC itself saw, not what the Session's own counters claim: every
// WR a soft device is handed (in post order, on the posting thread) and its
// stats since construction. The post hook is removed by Stop or on scope exit.
class PostRecorder {
 public:
  explicit PostRecorder(soft::SoftDevice& dev) : dev_(dev), before_(dev.stats()) {
    dev_.SetPostHook([this](const WorkRequest& wr) { seen_.push_back(wr); });
  }
  ~PostRecorder() { dev_.SetPostHook(nullptr); }
  // Stops recording and returns the WRs seen.
  const std::vector<WorkRequest>& Stop() {
    dev_.SetPostHook(nullptr);
    return seen_;
  }
  soft::SoftNicStats StatsSinceStart() const { return dev_.stats() - before_; }

 private:
  soft::SoftDevice& dev_;
  const soft::SoftNicStats before_;
  std::vector<WorkRequest> seen_;
};

TEST(SoftNic, SessionBatchSignalsOnlyItsLastWorkRequest) {
  auto cluster = SoftCluster(2);
  RemotePtr p = *cluster->node(1).Allocate(64);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE(s.ok());
  PostRecorder recorder(Soft(*cluster, 0));
  uint64_t r0 = 0, r1 = 0, old = 0;
  {
    Batch b(**s, 1);
    b.Write64(p, 1).Write64(p + 8, 2).Read(p, &r0, 8).Read(p + 8, &r1, 8).FetchAndAdd(p + 16, 5, &old);
    b.Write64(p + 24, 6);
    ASSERT_TRUE(b.Execute().ok());
  }
  const soft::SoftNicStats d = recorder.StatsSinceStart();
  const std::vector<WorkRequest>& seen = recorder.Stop();
  EXPECT_EQ(d.wrs_posted, 6u);
  EXPECT_EQ(d.doorbells, 1u);
  EXPECT_EQ(d.signaled_wrs, 1u);
  EXPECT_EQ(d.completions, 1u);
  ASSERT_EQ(seen.size(), 6u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].signaled, i + 1 == seen.size()) << i;
  EXPECT_EQ(r0, 1u);
  EXPECT_EQ(r1, 2u);
}

TEST(SoftNic, BatchFenceMarksExactlyTheNextWorkRequest) {
  auto cluster = SoftCluster(2);
  RemotePtr p = *cluster->node(1).Allocate(64);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE(s.ok());
  PostRecorder recorder(Soft(*cluster, 0));
  uint64_t r = 0, old = 0;
  ASSERT_TRUE(Batch(**s, 1).Write64(p, 1).Read(p, &r, 8).Fence().CompareAndSwap(p + 8, 0, 1, &old).Write64(p + 16, 2).Execute().ok());
  const std::vector<WorkRequest>& seen = recorder.Stop();
  EXPECT_EQ(recorder.StatsSinceStart().fenced_wrs, 1u);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_FALSE(seen[0].fence);
  EXPECT_FALSE(seen[1].fence);
  EXPECT_TRUE(seen[2].fence);
  EXPECT_EQ(seen[2].opcode, Opcode::kCompareSwap);
  EXPECT_FALSE(seen[3].fence);
}

TEST(SoftNic, SmallSessionWritesArePostedInline) {
  auto cluster = SoftCluster(2);
  RemotePtr p = *cluster->node(1).Allocate(4096);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE(s.ok());
  PostRecorder recorder(Soft(*cluster, 0));
  const char msg[] = "inline-16-bytes";  // stack memory, never registered
  ASSERT_TRUE((*s)->Write(p, msg, sizeof msg).ok());
  std::vector<char> big(2048, 'x');  // larger than any inline limit
  ASSERT_TRUE((*s)->Write(p + 64, big.data(), big.size()).ok());
  const std::vector<WorkRequest>& seen = recorder.Stop();
  EXPECT_EQ(recorder.StatsSinceStart().inline_wrs, 1u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].inline_data);
  EXPECT_EQ(seen[0].length, sizeof msg);
  EXPECT_FALSE(seen[1].inline_data);
  EXPECT_STREQ(p.local<char>(), msg);
}

TEST(SoftNic, LatencyInjectionDelaysEveryOperation) {
  auto cluster = SoftCluster(2);
  RemotePtr w = *cluster->node(1).Allocate(8);
  auto s = cluster->NewSession(0);
  Soft(*cluster, 0).SetLatency(std::chrono::milliseconds(2));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*s)->FetchAndAdd(w, 1).ok());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(10));
  Soft(*cluster, 0).SetLatency(std::chrono::nanoseconds(0));
}

// A READ that timed out must never land later: its result would go to the
// scratch bytes that the next operation's payload occupies. The timed-out QP
// is reset, so the next operation to that node fails instead of writing a
// mix, and after Reconnect it writes exactly what it was given.
TEST(SoftNic, TimedOutReadNeverLandsInALaterWritesPayload) {
  auto cluster = SoftCluster(2);
  RemotePtr word = *cluster->node(1).Allocate(8);
  RemotePtr dst = *cluster->node(1).Allocate(128);
  __atomic_store_n(word.local<uint64_t>(), 0xdeadbeefdeadbeefull, __ATOMIC_RELEASE);
  SessionOptions o;
  o.completion_timeout = std::chrono::milliseconds(60);
  auto s = cluster->NewSession(0, o);
  ASSERT_TRUE(s.ok());
  Soft(*cluster, 0).SetLatency(std::chrono::milliseconds(100));
  EXPECT_EQ((*s)->Read64(word).status().code(), absl::StatusCode::kDeadlineExceeded);
  Soft(*cluster, 0).SetLatency(std::chrono::nanoseconds(0));
  std::vector<uint8_t> payload(128);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i + 1);
  absl::Status after = (*s)->Write(dst, payload.data(), payload.size());  // 128 bytes: not inline, via scratch
  EXPECT_FALSE(after.ok()) << "the QP that timed out must be broken until Reconnect";
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the old READ's latency
  ASSERT_TRUE((*s)->Reconnect(1).ok());
  ASSERT_TRUE((*s)->Write(dst, payload.data(), payload.size()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(std::memcmp(dst.local<uint8_t>(), payload.data(), payload.size()), 0);
}

// Reconnect(n) resets n's QP and drops its completions from the shared CQ,
// but not other nodes' completions: a chain posted to node 2 without waiting
// completes, and Drain sees it (dropping node 2's completion would make Drain
// wait the whole completion timeout and fail).
TEST(SoftNic, ReconnectKeepsOtherNodesCompletions) {
  auto cluster = SoftCluster(3);
  RemotePtr on1 = *cluster->node(1).Allocate(8);
  RemotePtr on2 = *cluster->node(2).Allocate(8);
  SessionOptions o;
  o.completion_timeout = std::chrono::seconds(2);
  auto s = cluster->NewSession(0, o);
  ASSERT_TRUE(s.ok());
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(Batch(**s, 2).Write64(on2, round).PostWithoutWaiting().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the NIC executes it meanwhile
    ASSERT_TRUE((*s)->Reconnect(1).ok());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE((*s)->Drain().ok()) << round;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << round;
  }
  EXPECT_EQ(*(*s)->Read64(on2), 19u);
  EXPECT_TRUE((*s)->Write64(on1, 1).ok());
}

// A post that fails (the QP is not ready) counts nothing: no bytes either.
TEST(SoftNic, AFailedPostCountsNothing) {
  auto cluster = SoftCluster(2);
  RemotePtr w = *cluster->node(1).Allocate(8);
  auto s = cluster->NewSession(0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->queue_pair(1).Reset().ok());
  const OpCounters before = ThisThreadCounters();
  EXPECT_FALSE((*s)->Write64(w, 1).ok());
  const OpCounters d = ThisThreadCounters() - before;
  EXPECT_EQ(d.nic_ops, 0u);
  EXPECT_EQ(d.doorbells, 0u);
  EXPECT_EQ(d.bytes, 0u);
}

TEST(SoftNic, CompletionTimeoutIsAnErrorNotAHang) {
  auto cluster = SoftCluster(2);
  RemotePtr w = *cluster->node(1).Allocate(8);
  SessionOptions o;
  o.completion_timeout = std::chrono::milliseconds(50);
  auto s = cluster->NewSession(0, o);
  Soft(*cluster, 0).SetLatency(std::chrono::seconds(1));
  absl::Status st = (*s)->Write64(w, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  Soft(*cluster, 0).SetLatency(std::chrono::nanoseconds(0));
}

}  // namespace
}  // namespace rdma
