// LowerBound and Scan races of the ordered map that stress and lincheck runs
// reach only by chance, each made to happen here, deterministically where a
// hook allows:
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
//
// Soft NIC only; the map, the copy-hook Spy and the part's memory view are
// skiplist_race_env.h's.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/structures/skiplist_race_env.h"

namespace structures::skiplist_race {
namespace {

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
// while 1156 was bound: the reader must read again and answer 1156. The
// test checks that it built the reuse: a version that came out of the reuse
// at or below the one read must reach it exactly (a version that stepped
// past it would tell the re-validation of the change, and the test would
// pass without a reused node that looks unchanged).
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
  // Q's version: when the reader READ it, right after its reuse, and when
  // the re-validation reads it again (nobody writes Q after the hook).
  std::atomic<uint64_t> seen{0}, reused{0}, revalidated{0};
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
    revalidated.store(part.Peek(q).version);
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
  std::printf("[reused] Q's version %lu when read, %lu after its reuse, %lu when read again\n",
              static_cast<unsigned long>(seen.load()), static_cast<unsigned long>(reused.load()),
              static_cast<unsigned long>(revalidated.load()));
  if (reused.load() <= seen.load()) {
    // A reused node whose version did not go on from its old one: the test
    // brought it back to the version read, or the scenario was not built.
    ASSERT_EQ(revalidated.load(), seen.load())
        << "Q's version after its reuse (" << reused.load() << ") was not brought exactly to the one the reader saw";
  } else {
    // The version went on from the old one: no put or erase brings it back.
    ASSERT_GT(revalidated.load(), seen.load());
  }
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

}  // namespace
}  // namespace structures::skiplist_race
