#ifndef BENCH_MAP_BASELINES_H_
#define BENCH_MAP_BASELINES_H_

// What a user would pick instead of structures::HashMap on one machine
// (docs/design.md §8): the native-path timings of the map are compared, in the same
// run, against
//  * MutexUnorderedMap: std::unordered_map guarded by one std::mutex;
//  * ShardedFlatHashMap: absl::flat_hash_map split into kShards shards, each
//    guarded by its own absl::Mutex (readers take it shared).
// Both have the map's Get/Put shape: Get returns the value if present, Put
// stores and returns the previous value if there was one. Header-only.
//
// Debian's Abseil is not TSan-instrumented, so absl::Mutex's synchronization
// is invisible to TSan: do not run these under TSan (benchmarks never are).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace bench {

template <typename V>
class MutexUnorderedMap {
 public:
  explicit MutexUnorderedMap(size_t expected_size) { map_.reserve(expected_size); }

  std::optional<V> Get(uint64_t key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  std::optional<V> Put(uint64_t key, const V& value) {
    std::lock_guard<std::mutex> l(mu_);
    auto [it, inserted] = map_.try_emplace(key, value);
    if (inserted) return std::nullopt;
    std::optional<V> old = it->second;
    it->second = value;
    return old;
  }

  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return map_.size();
  }

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, V> map_;
};

// Under TSan the sharded map's operations stay out of line: Debian's libabsl
// is not built with -fsanitize=thread, so absl::Mutex's synchronization is
// invisible to TSan, and the suite suppresses this class's reports by name
// (bench/suite/tsan_suppressions.txt), which needs its frame in the report.
#if defined(__SANITIZE_THREAD__)
#define BENCH_TSAN_NOINLINE ABSL_ATTRIBUTE_NOINLINE
#else
#define BENCH_TSAN_NOINLINE
#endif

template <typename V, size_t kShards = 64>
class ShardedFlatHashMap {
  static_assert((kShards & (kShards - 1)) == 0, "kShards must be a power of two");

 public:
  static constexpr size_t shards() { return kShards; }

  explicit ShardedFlatHashMap(size_t expected_size) : shards_(new Shard[kShards]) {
    for (size_t i = 0; i < kShards; ++i) shards_[i].map.reserve(expected_size / kShards + 1);
  }

  BENCH_TSAN_NOINLINE std::optional<V> Get(uint64_t key) {
    Shard& s = ShardOf(key);
    absl::ReaderMutexLock l(&s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    return it->second;
  }

  BENCH_TSAN_NOINLINE std::optional<V> Put(uint64_t key, const V& value) {
    Shard& s = ShardOf(key);
    absl::MutexLock l(&s.mu);
    auto [it, inserted] = s.map.try_emplace(key, value);
    if (inserted) return std::nullopt;
    std::optional<V> old = it->second;
    it->second = value;
    return old;
  }

  size_t size() {
    size_t n = 0;
    for (size_t i = 0; i < kShards; ++i) {
      absl::ReaderMutexLock l(&shards_[i].mu);
      n += shards_[i].map.size();
    }
    return n;
  }

 private:
  struct alignas(64) Shard {
    absl::Mutex mu;
    absl::flat_hash_map<uint64_t, V> map;
  };

  // Fibonacci hashing on the top bits: independent of the absl::Hash bits the
  // shard's table uses internally (using the same low bits would starve its
  // 7-bit control hashes).
  Shard& ShardOf(uint64_t key) {
    constexpr int kBits = __builtin_ctzll(kShards);
    if constexpr (kBits == 0) return shards_[0];
    return shards_[(key * 0x9E3779B97F4A7C15ull) >> (64 - kBits)];
  }

  std::unique_ptr<Shard[]> shards_;
};

}  // namespace bench

#endif  // BENCH_MAP_BASELINES_H_
