// Native readers of the ordered map against writers, races that stress and
// lincheck runs reach only by chance:
//
//  * at full speed: a writer (native or NIC) overwrites one key whose value
//    straddles two cache lines while a native reader loops over Get,
//    LowerBound and Scan of it;
//  * inside a NIC writer's WRITE chain, made to pause there by the soft NIC's
//    copy hook.
//
// Soft NIC only; the map, the copy-hook Spy and the part's memory view are
// skiplist_race_env.h's.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/path.h"
#include "rdma/work_request.h"
#include "tests/structures/skiplist_race_env.h"

namespace structures::skiplist_race {
namespace {

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

}  // namespace
}  // namespace structures::skiplist_race
