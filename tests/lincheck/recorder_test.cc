// The recorder: what it records, pending operations, thread safety (run it
// under --config=tsan), and end-to-end detection of deliberately broken
// structures recorded from real threads.

#include "tests/lincheck/recorder.h"

#include <barrier>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

TEST(RecorderTest, RecordsOperations) {
  Recorder rec;
  const int64_t before = Recorder::NowNs();
  Recorder::Token t = rec.Invoke(3, 1, Path::kRemote, "put", {7, 70});
  rec.Complete(t, {0, 0});
  Recorder::Token u = rec.Invoke(3, 1, Path::kRemote, "get", {7});
  rec.Complete(u, {1, 70});
  const int64_t after = Recorder::NowNs();

  History history = rec.Finish();
  ASSERT_EQ(history.size(), 2);
  const Operation& put = history[0];
  EXPECT_EQ(put.thread, 3);
  EXPECT_EQ(put.node, 1);
  EXPECT_EQ(put.path, Path::kRemote);
  EXPECT_EQ(put.op, "put");
  EXPECT_EQ(put.args, (Values{7, 70}));
  EXPECT_EQ(put.result, (Values{0, 0}));
  EXPECT_LE(before, put.invoke_ns);
  EXPECT_LE(put.invoke_ns, put.response_ns);
  EXPECT_LE(put.response_ns, history[1].invoke_ns);
  EXPECT_LE(history[1].response_ns, after);
  EXPECT_TRUE(IsLinearizable(MapModel(), history));
}

TEST(RecorderTest, FinishSortsByInvokeTimeAndResets) {
  Recorder rec;
  Recorder::Token a = rec.Invoke(1, 0, Path::kNative, "get", {1});
  Recorder::Token b = rec.Invoke(0, 0, Path::kNative, "get", {2});
  rec.Complete(b, {0, 0});
  rec.Complete(a, {0, 0});
  History history = rec.Finish();
  ASSERT_EQ(history.size(), 2);
  EXPECT_EQ(history[0].args[0], 1);
  EXPECT_EQ(history[1].args[0], 2);
  EXPECT_TRUE(rec.Finish().empty());
}

TEST(RecorderTest, UncompletedOperationsArePending) {
  Recorder rec;
  ThreadRecorder r(rec, 0, 0, Path::kLoopback);
  {
    ScopedOp op(r, "put", {1, 5});
    // Leaves the scope without Complete: a transport error, say.
  }
  {
    ScopedOp op(r, "get", {1});
    op.Complete({1, 5});
    op.Complete({0, 0});  // ignored: completed once
  }
  r.Invoke("erase", {1});  // never completed
  History history = rec.Finish();
  ASSERT_EQ(history.size(), 3);
  EXPECT_TRUE(history[0].pending());
  EXPECT_TRUE(history[0].result.empty());
  EXPECT_EQ(history[0].path, Path::kLoopback);
  EXPECT_FALSE(history[1].pending());
  EXPECT_EQ(history[1].result, (Values{1, 5}));
  EXPECT_TRUE(history[2].pending());
  // The pending put took effect (the get saw it); the erase may not have.
  EXPECT_TRUE(IsLinearizable(MapModel(), history));
}

TEST(RecorderDeathTest, RejectsBadThreadIds) {
  Recorder rec(4);
  EXPECT_DEATH(rec.Invoke(4, 0, Path::kNative, "get", {1}), "out of range");
  EXPECT_DEATH(rec.Invoke(-1, 0, Path::kNative, "get", {1}), "out of range");
}

constexpr int kThreads = 8;
constexpr int kOpsPerThread = 2000;

// A correct map (one mutex) driven by 8 threads: the history must pass.
TEST(RecorderTest, ConcurrentCorrectMapIsLinearizable) {
  std::mutex mu;
  std::map<int64_t, int64_t> map;
  Recorder rec;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ThreadRecorder r(rec, t, /*node=*/t % 2, Path::kNative);
      uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1);
      for (int i = 0; i < kOpsPerThread; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int64_t key = x % 16;
        const int64_t value = static_cast<int64_t>(t) * 1000000 + i;
        if (x % 3 == 0) {
          auto token = r.Invoke("get", {key});
          std::unique_lock lock(mu);
          auto it = map.find(key);
          const Values result = it == map.end() ? Values{0, 0} : Values{1, it->second};
          lock.unlock();
          r.Complete(token, result);
        } else if (x % 3 == 1) {
          auto token = r.Invoke("put", {key, value});
          std::unique_lock lock(mu);
          auto [it, inserted] = map.try_emplace(key, value);
          const Values result = inserted ? Values{0, 0} : Values{1, it->second};
          it->second = value;
          lock.unlock();
          r.Complete(token, result);
        } else {
          auto token = r.Invoke("erase", {key});
          std::unique_lock lock(mu);
          auto it = map.find(key);
          Values result = {0, 0};
          if (it != map.end()) {
            result = {1, it->second};
            map.erase(it);
          }
          lock.unlock();
          r.Complete(token, result);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  History history = rec.Finish();
  ASSERT_EQ(history.size(), kThreads * kOpsPerThread);
  EXPECT_TRUE(IsLinearizable(MapModel(), history));
}

// A correct queue driven by 4 threads, with distinct values.
TEST(RecorderTest, ConcurrentCorrectQueueIsLinearizable) {
  std::mutex mu;
  std::deque<int64_t> queue;
  Recorder rec;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ThreadRecorder r(rec, t, 0, Path::kNative);
      for (int i = 0; i < kOpsPerThread; ++i) {
        if ((i + t) % 2 == 0) {
          const int64_t value = (int64_t{t} << 32) | i;  // distinct
          auto token = r.Invoke("enqueue", {value});
          {
            std::lock_guard lock(mu);
            queue.push_back(value);
          }
          r.Complete(token, {});
        } else {
          auto token = r.Invoke("dequeue", {});
          std::optional<int64_t> front;
          {
            std::lock_guard lock(mu);
            if (!queue.empty()) {
              front = queue.front();
              queue.pop_front();
            }
          }
          r.Complete(token, front ? Values{1, *front} : Values{0, 0});
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(IsLinearizable(QueueModel(), rec.Finish()));
}

// A broken map whose put reads the previous value and writes the new one in
// two separate critical sections. The barrier forces the interleaving in
// which both threads read before either writes: a lost update.
TEST(RecorderTest, CatchesLostUpdateMutant) {
  std::mutex mu;
  std::map<int64_t, int64_t> map;
  std::barrier both_read(2);
  Recorder rec;
  auto broken_put = [&](ThreadRecorder& r, int64_t key, int64_t value) {
    auto token = r.Invoke("put", {key, value});
    Values prev;
    {
      std::lock_guard lock(mu);
      auto it = map.find(key);
      prev = it == map.end() ? Values{0, 0} : Values{1, it->second};
    }
    both_read.arrive_and_wait();
    {
      std::lock_guard lock(mu);
      map[key] = value;
    }
    r.Complete(token, prev);
  };
  std::thread a([&] {
    ThreadRecorder r(rec, 0, 0, Path::kNative);
    broken_put(r, 1, 10);
  });
  std::thread b([&] {
    ThreadRecorder r(rec, 1, 1, Path::kRemote);
    broken_put(r, 1, 20);
  });
  a.join();
  b.join();
  EXPECT_TRUE(IsNotLinearizable(MapModel(), rec.Finish()));
}

// A broken map that answers gets from a snapshot taken at start: once a put
// completes, a later get returns the stale value.
TEST(RecorderTest, CatchesStaleReadMutant) {
  std::map<int64_t, int64_t> live, snapshot;
  Recorder rec;
  std::thread writer([&] {
    ThreadRecorder r(rec, 0, 0, Path::kNative);
    auto token = r.Invoke("put", {1, 5});
    live[1] = 5;
    r.Complete(token, {0, 0});
  });
  writer.join();
  std::thread reader([&] {
    ThreadRecorder r(rec, 1, 1, Path::kRemote);
    auto token = r.Invoke("get", {1});
    const bool found = snapshot.count(1) > 0;
    r.Complete(token, {found ? 1 : 0, found ? snapshot[1] : 0});
  });
  reader.join();
  EXPECT_TRUE(IsNotLinearizable(MapModel(), rec.Finish()));
}

// A broken queue that pops from the wrong end.
TEST(RecorderTest, CatchesLifoQueueMutant) {
  std::deque<int64_t> queue;
  Recorder rec;
  ThreadRecorder r(rec, 0, 0, Path::kNative);
  for (int64_t v : {1, 2, 3}) {
    auto token = r.Invoke("enqueue", {v});
    queue.push_back(v);
    r.Complete(token, {});
  }
  auto token = r.Invoke("dequeue", {});
  const int64_t back = queue.back();
  queue.pop_back();
  r.Complete(token, {1, back});
  EXPECT_TRUE(IsNotLinearizable(QueueModel(), rec.Finish()));
}

}  // namespace
}  // namespace lincheck
