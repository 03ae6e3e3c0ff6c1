// Queue checks that the recorded stress (queue_stress.h, whose native
// workers think between operations) does not reach, each shown by its own
// test (tests/README.md, audit table):
//  * native producers and consumers at full speed on one node, next to NIC
//    threads: a native consumer that reads a payload before its seq word, a
//    native producer that publishes before its payload lose or duplicate
//    values only within nanoseconds of each other, which 20 us of think
//    time between operations hides;
//  * a native consumer waits for a producer's claim in flight instead of
//    answering "empty";
//  * a seq word seen half written (a publish whose bytes land one at a
//    time) is read again until whole, natively and over loopback (where the
//    lock chain's primed copy must not be reused): the consumer returns the
//    value, not "empty" and not DataLoss;
//  * a seq word that stays neither free nor full is DataLoss for consumers
//    and producers, never a value or a slot to write.
// Soft NIC only. The seq-word tests change ring words with CPU stores, at
// the places layout.h defines.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/rmw_word.h"
#include "structures/queue/layout.h"
#include "structures/queue/queue.h"
#include "testing/backends.h"
#include "testing/sanitizers.h"

namespace structures {
namespace {

using queue_internal::Header;
using queue_internal::RingLayout;

struct Val {
  int64_t w[4];
};
Val Make(int64_t v) { return {{v, v, v, v}}; }
bool Whole(const Val& x) { return x.w[0] == x.w[1] && x.w[1] == x.w[2] && x.w[2] == x.w[3]; }

using rdma::testing::kSanitized;

// A native producer and two native consumers on node 0 looping with no
// pause on node 0's ring of 8 slots, plus a loopback producer and a remote
// consumer, which pause 100 us between operations (a NIC operation holds its
// side's lock for round trips; back to back they would keep the native
// threads waiting most of the time instead of racing each other). More
// native consumers than producers keep the ring near empty, so consumers
// read each slot as it is published, and the two native consumers claim
// from the head's one claim word. Values are (producer + 1) << 32 | n, all four words equal.
// Each consumer checks every value is whole and that it sees each
// producer's values in increasing order (FIFO); at the end every value
// enqueued was dequeued exactly once. The run lasts until the native
// producer has enqueued kWant values (at least 1.5 s, at most 20 s): on a
// loaded machine the native threads overlap less, and it runs longer.
TEST(QueueChecks, FullSpeedNativeProducersAndConsumersWithNicThreads) {
  auto cluster = rdma::testing::MakeCluster("soft", 2, 16 << 20);
  ASSERT_NE(cluster, nullptr);
  QueueOptions qo;
  qo.capacity = 8;
  qo.lock_timeout = std::chrono::seconds(20);
  auto q = Queue<Val>::Create(*cluster, qo);
  ASSERT_TRUE(q.ok()) << q.status();

  struct Worker {
    rdma::NodeId node;
    Path path;
    bool producer;
    std::chrono::microseconds pause{0};
  };
  const std::vector<Worker> workers = {{0, Path::kAuto, true},
                                       {0, Path::kAuto, false},
                                       {0, Path::kAuto, false},
                                       {0, Path::kLoopback, true, std::chrono::microseconds(100)},
                                       {1, Path::kAuto, false, std::chrono::microseconds(100)}};
  const int num_producers = 2;  // producer 0 native, 1 loopback
  constexpr int64_t kWant = 300'000;
  const auto min_duration = std::chrono::milliseconds(1500);
  const auto max_duration = std::chrono::seconds(kSanitized ? 10 : 20);
  constexpr int64_t kMaxPerProducer = 4'000'000;  // bounds memory

  std::atomic<int64_t> native_progress{0};
  std::atomic<bool> stop{false};          // producers stop
  std::atomic<bool> stop_all{false};      // an error: everyone stops
  std::atomic<int> producing{num_producers};
  std::atomic<int> ready{0};
  std::vector<int64_t> produced(num_producers, 0);
  std::vector<std::vector<int64_t>> taken(workers.size());  // per consumer, in order
  std::mutex mu;
  std::vector<std::string> errors;
  auto fail = [&](std::string what) {
    std::lock_guard<std::mutex> l(mu);
    errors.push_back(std::move(what));
    stop.store(true);
    stop_all.store(true);
  };

  std::vector<std::thread> threads;
  int next_producer = 0;
  for (size_t t = 0; t < workers.size(); ++t) {
    const Worker w = workers[t];
    const int pid = w.producer ? next_producer++ : -1;
    threads.emplace_back([&, t, w, pid] {
      auto session = cluster->NewSession(w.node);
      auto client = session.ok() ? q->NewClient(**session)
                                 : absl::StatusOr<std::unique_ptr<Queue<Val>::Client>>(session.status());
      ready.fetch_add(1);
      while (ready.load() < static_cast<int>(workers.size())) std::this_thread::yield();
      if (!client.ok()) {
        fail(absl::StrCat("worker ", t, ": ", client.status().ToString()));
        if (w.producer) producing.fetch_sub(1);
        return;
      }
      auto& c = **client;
      if (w.producer) {
        int64_t n = 0;
        while (!stop.load(std::memory_order_relaxed) && n < kMaxPerProducer) {
          const int64_t v = (int64_t{pid + 1} << 32) | (n + 1);
          absl::StatusOr<bool> in = c.Enqueue(0, Make(v), w.path);
          if (!in.ok()) {
            fail(absl::StrCat("producer ", pid, ": ", in.status().ToString()));
            break;
          }
          if (*in) ++n;  // full: try again at once
          if (pid == 0 && (n & 1023) == 0) native_progress.store(n, std::memory_order_relaxed);
          if (w.pause.count() > 0) std::this_thread::sleep_for(w.pause);
        }
        produced[pid] = n;
        producing.fetch_sub(1);
        return;
      }
      std::vector<int64_t>& mine = taken[t];
      std::vector<int64_t> last(num_producers, 0);
      for (;;) {
        const bool drained_after = producing.load() == 0;  // read before the dequeue
        absl::StatusOr<std::optional<Val>> out = c.Dequeue(0, w.path);
        if (!out.ok()) {
          fail(absl::StrCat("consumer ", t, ": ", out.status().ToString()));
          return;
        }
        if (w.pause.count() > 0) std::this_thread::sleep_for(w.pause);
        if (!out->has_value()) {
          if (drained_after || stop_all.load()) return;  // empty after every enqueue returned
          continue;
        }
        const Val& x = **out;
        if (!Whole(x)) {
          fail(absl::StrCat("consumer ", t, " took a torn value ", x.w[0], " ", x.w[1], " ", x.w[2], " ", x.w[3]));
          return;
        }
        const int64_t p = (x.w[0] >> 32) - 1, n = x.w[0] & 0xffffffff;
        if (p < 0 || p >= num_producers || n == 0) {
          fail(absl::StrCat("consumer ", t, " took ", x.w[0], ", which nobody enqueued"));
          return;
        }
        if (n <= last[p]) {
          fail(absl::StrCat("consumer ", t, " took value ", n, " of producer ", p, " after its value ", last[p]));
          return;
        }
        last[p] = n;
        mine.push_back(x.w[0]);
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (stop_all.load() || elapsed >= max_duration) break;
    if (elapsed >= min_duration && native_progress.load() >= kWant) break;
  }
  const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  stop.store(true);
  for (auto& th : threads) th.join();
  ASSERT_TRUE(errors.empty()) << errors.size() << " error(s), first: " << errors.front();

  std::vector<std::vector<int64_t>> by_producer(num_producers);
  size_t total = 0;
  for (const auto& v : taken) {
    for (int64_t x : v) by_producer[(x >> 32) - 1].push_back(x & 0xffffffff);
    total += v.size();
  }
  for (int p = 0; p < num_producers; ++p) {
    std::vector<int64_t>& got = by_producer[p];
    std::sort(got.begin(), got.end());
    const auto dup = std::adjacent_find(got.begin(), got.end());
    EXPECT_EQ(dup, got.end()) << "producer " << p << "'s value " << *dup << " was dequeued twice";
    EXPECT_EQ(static_cast<int64_t>(got.size()), produced[p]) << "producer " << p << " enqueued " << produced[p]
                                                             << ", " << got.size() << " came out";
    if (!got.empty()) {
      EXPECT_EQ(got.back(), produced[p]);
    }
  }
  std::printf("%zu values through a ring of 8 in %lld ms: produced %lld (native), %lld (loopback)\n", total,
              static_cast<long long>(ran.count()), static_cast<long long>(produced[0]),
              static_cast<long long>(produced[1]));
  EXPECT_GT(produced[0], 1000) << "the native producer hardly ran";
  EXPECT_GT(produced[1], 0) << "the loopback producer never got in";
}

// Node 0's ring of a one-node queue, found by its first payload: the tests
// below change its words as a writer in flight, or a broken one, would.
class RingWords {
 public:
  // Enqueues and dequeues a marker natively through `c`: afterwards the ring
  // is empty at position 1.
  static absl::StatusOr<RingWords> Find(rdma::Node& node, Queue<Val>::Client& c, uint64_t capacity) {
    const Val marker = {{0x5eed0001, 0x5eed0002, 0x5eed0003, 0x5eed0004}};
    if (!c.Enqueue(0, marker).value_or(false)) return absl::InternalError("cannot enqueue the marker");
    const rdma::ArenaInfo a = node.arena_info();
    const RingLayout<Val> l{capacity};
    for (uint64_t at = a.base; at + sizeof(Val) <= a.base + a.length; at += 8) {
      // Atomic loads: the keeper thread of the queue's native leases may
      // store lock words of the ring meanwhile.
      const auto* w = reinterpret_cast<const rdma::PlainWord*>(at);
      if (w[0].Load() != 0x5eed0001 || w[1].Load() != 0x5eed0002 || w[2].Load() != 0x5eed0003 ||
          w[3].Load() != 0x5eed0004) {
        continue;
      }
      char* base = reinterpret_cast<char*>(at - l.payload_offset(0));
      if (RingWords(base, l).Frontier(/*producer=*/true) != 1) continue;
      auto out = c.Dequeue(0);
      if (!out.ok() || !out->has_value()) return absl::InternalError("cannot dequeue the marker");
      return RingWords(base, l);
    }
    return absl::InternalError("the marker is nowhere in the arena");
  }
  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  // How far the producers (tail) or consumers (head) have got: the larger
  // of the side's counter and its native claim word (layout.h, Frontier).
  uint64_t Frontier(bool producer) const {
    const Header& h = header();
    return queue_internal::Frontier(producer ? h.tail.Load() : h.head.Load(),
                                    producer ? h.tail_claim.Load() : h.head_claim.Load());
  }
  rdma::PlainWord& seq(uint64_t position) const {
    return *reinterpret_cast<rdma::PlainWord*>(base_ + l_.seq_offset(l_.Slot(position)));
  }
  rdma::PlainWord* payload(uint64_t position) const {
    return reinterpret_cast<rdma::PlainWord*>(base_ + l_.payload_offset(l_.Slot(position)));
  }
  const RingLayout<Val>& layout() const { return l_; }

 private:
  RingWords(char* base, RingLayout<Val> l) : base_(base), l_(l) {}
  char* base_;
  RingLayout<Val> l_;
};

class QueueSeqWordTest : public ::testing::Test {
 protected:
  void Make(uint64_t capacity) {
    cluster_ = rdma::testing::MakeCluster("soft", 1, 4 << 20);
    ASSERT_NE(cluster_, nullptr);
    QueueOptions qo;
    qo.capacity = capacity;
    qo.lock_timeout = std::chrono::seconds(20);
    auto q = Queue<Val>::Create(*cluster_, qo);
    ASSERT_TRUE(q.ok()) << q.status();
    q_ = std::make_unique<Queue<Val>>(std::move(*q));
    auto c = q_->NewClient(cluster_->node(0));  // native only
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    auto session = cluster_->NewSession(0);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    auto nic = q_->NewClient(*session_);  // loopback too
    ASSERT_TRUE(nic.ok()) << nic.status();
    nic_client_ = std::move(*nic);
    auto ring = RingWords::Find(cluster_->node(0), *client_, capacity);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_.emplace(*ring);
  }
  void TearDown() override {
    client_.reset();
    nic_client_.reset();
    q_.reset();
  }
  void TornPublishIsReadAgainUntilWhole(Path path);
  void BrokenSeqIsDataLossForAConsumer(Path path);
  void BrokenSeqIsDataLossForAProducer(Path path);

  std::unique_ptr<rdma::Cluster> cluster_;
  std::unique_ptr<Queue<Val>> q_;
  std::unique_ptr<rdma::Session> session_;
  std::unique_ptr<Queue<Val>::Client> client_, nic_client_;
  std::optional<RingWords> ring_;
};

// A publish seen half landed. Capacity 3 and position 255: the slot's seq
// goes from "free for 255" (0xff) to "holds 255" (0x100), two bytes. With
// its low byte landed and the next not yet, the word reads 0: neither free
// nor full. The consumer (inside its step: it holds the head lock) must read
// the word again until it is whole, then return the value; not "empty", and
// not DataLoss (the rest lands 100 ms later, well inside its 2 s). Natively,
// and over loopback, where the acquire's chain has already read (primed)
// the half-written word: the re-read must be a new READ, not the primed copy.
void QueueSeqWordTest::TornPublishIsReadAgainUntilWhole(Path path) {
  Make(3);
  Queue<Val>::Client& c = path == Path::kNative ? *client_ : *nic_client_;
  const RingLayout<Val>& l = ring_->layout();
  for (int64_t i = 1; i < 255; ++i) {  // the marker took position 0
    ASSERT_TRUE(*c.Enqueue(0, ::structures::Make(i), path));
    ASSERT_EQ((*c.Dequeue(0, path))->w[0], i);  // also: the NIC client's next guess is 255
  }
  constexpr uint64_t p = 255;
  ASSERT_EQ(ring_->Frontier(/*producer=*/false), p);
  ASSERT_EQ(ring_->seq(p).Load(), l.FreeFor(p));
  ASSERT_EQ(l.FreeFor(p), 0xffu);
  ASSERT_EQ(l.HoldsValueOf(p), 0x100u);
  // The producer's payload, whole, then the seq's first byte.
  const Val v = ::structures::Make(777);
  for (int x = 0; x < 4; ++x) ring_->payload(p)[x].Store(static_cast<uint64_t>(v.w[x]));
  auto* bytes = reinterpret_cast<uint8_t*>(&ring_->seq(p));  // the word's bytes, low first (x86)
  std::atomic_ref<uint8_t>(bytes[0]).store(0x00, std::memory_order_release);
  ASSERT_EQ(ring_->seq(p).Load(), 0u);

  absl::StatusOr<std::optional<Val>> out;
  std::thread consumer([&] { out = c.Dequeue(0, path); });
  // Over the NIC the consumer holds the head lock while it works (r_tail is
  // up); natively it works inside the open lease. Either way it reads the
  // torn word for 100 ms.
  if (path != Path::kNative) {
    const locks::ALockWord& head_lock = ring_->header().head_lock;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (head_lock.r_tail.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::atomic_ref<uint8_t>(bytes[1]).store(0x01, std::memory_order_release);  // the rest lands
  ring_->header().tail.Store(p + 1);
  consumer.join();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->has_value()) << "a publish in flight read as \"empty\"";
  EXPECT_EQ((*out)->w[0], 777);
  EXPECT_EQ(ring_->seq(p).Load(), l.FreedAfter(p));
  EXPECT_EQ(*c.Dequeue(0, path), std::nullopt);
  ASSERT_TRUE(*c.Enqueue(0, ::structures::Make(778), path));
  EXPECT_EQ((*c.Dequeue(0, path))->w[0], 778);
}

TEST_F(QueueSeqWordTest, ASeqWordSeenHalfWrittenIsReadAgainUntilWhole) {
  TornPublishIsReadAgainUntilWhole(Path::kNative);
}
TEST_F(QueueSeqWordTest, ASeqWordSeenHalfWrittenIsReadAgainUntilWholeOverLoopback) {
  TornPublishIsReadAgainUntilWhole(Path::kLoopback);
}

// A native producer that claimed position p and has not published it yet
// (the test makes its claim CAS on the claim word and stops), while another
// producer's later value (position p + 1) is already in: a consumer must wait
// for position 1, not answer "empty" (the later enqueue returned before
// the dequeue began), and then takes the two values in order.
TEST_F(QueueSeqWordTest, AConsumerWaitsForAProducersClaimInFlightInsteadOfSayingEmpty) {
  Make(4);
  // The stalled producer's claim: a CAS on the open claim word (the keeper
  // closes a lease idle for two periods: open it again by an operation).
  uint64_t c = 0;
  for (int i = 0;; ++i) {
    ASSERT_LT(i, 1000) << "the tail's lease never stayed open";
    c = ring_->header().tail_claim.Load();
    if ((c & queue_internal::kClaimOpen) != 0) {
      if (ring_->header().tail_claim.CompareExchange(c, c + 1)) break;
      continue;
    }
    ASSERT_TRUE(*client_->Enqueue(0, ::structures::Make(100)));
    ASSERT_TRUE((*client_->Dequeue(0))->w[0] == 100);
  }
  const uint64_t p = c & ~queue_internal::kClaimOpen;  // claimed, not published
  ASSERT_TRUE(*client_->Enqueue(0, ::structures::Make(2)));  // position p + 1, published
  auto consumer_client = q_->NewClient(cluster_->node(0));
  ASSERT_TRUE(consumer_client.ok()) << consumer_client.status();
  std::atomic<bool> done{false};
  absl::StatusOr<std::optional<Val>> first;
  std::thread consumer([&] {
    first = (*consumer_client)->Dequeue(0);
    done.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done.load()) << "the consumer answered while position 1 was claimed and not yet published";
  const Val v = ::structures::Make(1);  // the stalled producer completes
  for (int x = 0; x < 4; ++x) ring_->payload(p)[x].Store(static_cast<uint64_t>(v.w[x]));
  ring_->seq(p).Store(ring_->layout().HoldsValueOf(p));
  consumer.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value()) << "\"empty\" while a later value was in";
  EXPECT_EQ((*first)->w[0], 1);
  auto second = (*consumer_client)->Dequeue(0);
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status();
  EXPECT_EQ((*second)->w[0], 2);
  EXPECT_EQ(*(*consumer_client)->Dequeue(0), std::nullopt);
}

// A seq word that stays neither free nor full (a writer broke the protocol):
// a consumer returns DataLoss, not the slot's payload and not "empty";
// natively and over loopback (the lock chain's checks, layout.h).
void QueueSeqWordTest::BrokenSeqIsDataLossForAConsumer(Path path) {
  Make(4);
  ASSERT_TRUE(*client_->Enqueue(0, ::structures::Make(5)));  // position 1
  ring_->seq(1).Store(0xdead0000);
  Queue<Val>::Client& c = path == Path::kNative ? *client_ : *nic_client_;
  const absl::StatusOr<std::optional<Val>> out = c.Dequeue(0, path);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss)
      << (out.ok() ? (out->has_value() ? "took a value" : "said empty") : out.status().ToString());
}
TEST_F(QueueSeqWordTest, AConsumerFindingASeqWordNeitherFreeNorFullReturnsDataLoss) {
  BrokenSeqIsDataLossForAConsumer(Path::kNative);
}
TEST_F(QueueSeqWordTest, AConsumerFindingASeqWordNeitherFreeNorFullReturnsDataLossOverLoopback) {
  BrokenSeqIsDataLossForAConsumer(Path::kLoopback);
}

// The same for a producer: DataLoss, not a slot to write.
void QueueSeqWordTest::BrokenSeqIsDataLossForAProducer(Path path) {
  Make(4);
  ring_->seq(1).Store(0xdead0000);  // the tail is at position 1
  Queue<Val>::Client& c = path == Path::kNative ? *client_ : *nic_client_;
  const absl::StatusOr<bool> in = c.Enqueue(0, ::structures::Make(5), path);
  EXPECT_EQ(in.status().code(), absl::StatusCode::kDataLoss)
      << (in.ok() ? (*in ? "enqueued" : "said full") : in.status().ToString());
}
TEST_F(QueueSeqWordTest, AProducerFindingASeqWordNeitherFreeNorFullReturnsDataLoss) {
  BrokenSeqIsDataLossForAProducer(Path::kNative);
}
TEST_F(QueueSeqWordTest, AProducerFindingASeqWordNeitherFreeNorFullReturnsDataLossOverLoopback) {
  BrokenSeqIsDataLossForAProducer(Path::kLoopback);
}

}  // namespace
}  // namespace structures
