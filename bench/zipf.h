#ifndef BENCH_ZIPF_H_
#define BENCH_ZIPF_H_

// Key sets and operation traces for the key-value benchmarks
// (bench/hash_map_bench.cc, bench/skiplist_bench.cc). Header-only.
//
// Key popularity:
//  * uniform: every key of the set equally likely;
//  * Zipf(s): the key of rank r (r = 1..N) has probability proportional to
//    r^-s. s = 0.99 is the YCSB default.
//
// Why not absl::zipf_distribution: it draws x in [0, k] with
// P(x) ~ (v + x)^-q, so with k = N - 1 and v = 1 it is exactly Zipf with
// exponent s = q over ranks 1..N. But Abseil documents q > 1 as a
// precondition (and asserts it in builds without NDEBUG), so q = 0.99 is
// outside its contract. We therefore draw ranks with
// absl::discrete_distribution (Walker's alias method, O(1) per draw) built
// from the exact weights r^-0.99 over the N keys: same library family, no
// hand-written sampler, and exactly the target distribution.
//
// Traces are pre-generated (one per thread) so that the random number
// generation is not part of the measured loop, and the map and the baselines
// replay identical operation sequences.

#include <cmath>
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/random/discrete_distribution.h"
#include "absl/random/distributions.h"
#include "absl/random/random.h"

namespace bench {

enum class KeyDist { kUniform, kZipf };

inline const char* KeyDistName(KeyDist d) { return d == KeyDist::kUniform ? "uniform" : "zipf0.99"; }

inline constexpr double kZipfExponent = 0.99;

// One traced operation: bits 0..30 index the key set, bit 31 says "put".
inline constexpr uint32_t kPutBit = uint32_t{1} << 31;
inline constexpr uint32_t kIndexMask = kPutBit - 1;

// Rank sampler: returns an index in [0, n) where index i has rank i + 1.
class RankSampler {
 public:
  RankSampler(KeyDist dist, size_t n, double exponent = kZipfExponent) : dist_(dist), n_(n) {
    if (dist_ == KeyDist::kZipf) {
      std::vector<double> w(n);
      for (size_t i = 0; i < n; ++i) w[i] = std::pow(static_cast<double>(i + 1), -exponent);
      zipf_ = absl::discrete_distribution<uint32_t>(w.begin(), w.end());
    }
  }
  template <typename Gen>
  uint32_t operator()(Gen& gen) {
    if (dist_ == KeyDist::kZipf) return zipf_(gen);
    return absl::Uniform<uint32_t>(gen, 0, static_cast<uint32_t>(n_));
  }

 private:
  KeyDist dist_;
  size_t n_;
  absl::discrete_distribution<uint32_t> zipf_;
};

// `length` operations over a key set of `n_keys` keys, a fraction
// put_percent/100 of them puts (chosen independently per op). Deterministic
// for a given seed.
inline std::vector<uint32_t> MakeTrace(size_t n_keys, KeyDist dist, int put_percent, size_t length, uint64_t seed) {
  std::mt19937_64 gen(seed);
  RankSampler rank(dist, n_keys);
  std::vector<uint32_t> trace(length);
  for (auto& op : trace) {
    op = rank(gen);
    if (absl::Uniform<int>(gen, 0, 100) < put_percent) op |= kPutBit;
  }
  return trace;
}

// A thread's operations over a key set, materialized: the keys in order
// (read sequentially, so the replay itself adds no cache misses) and one
// "put" bit per operation (MakeTrace's choices, with its seed).
struct KeyTrace {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> put_bits;
  bool is_put(size_t i) const { return (put_bits[i / 64] >> (i % 64)) & 1; }
};
inline KeyTrace MakeKeyTrace(const std::vector<uint64_t>& key_set, KeyDist dist, int put_percent, size_t length,
                             uint64_t seed) {
  const std::vector<uint32_t> ops = MakeTrace(key_set.size(), dist, put_percent, length, seed);
  KeyTrace t;
  t.keys.resize(length);
  t.put_bits.assign((length + 63) / 64, 0);
  for (size_t i = 0; i < length; ++i) {
    t.keys[i] = key_set[ops[i] & kIndexMask];
    if (ops[i] & kPutBit) t.put_bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  return t;
}

// The traces of one benchmark binary, made on first use and kept for the
// process: one per (mix, key distribution, thread), where `mix` is whatever
// the binary numbers its workloads by. Thread-safe; a returned trace stays
// valid and unchanged for the cache's lifetime.
class TraceCache {
 public:
  // The trace of (mix, dist, thread); `make()` (returning a KeyTrace) makes
  // it the first time.
  template <typename Make>
  const KeyTrace& Get(int mix, KeyDist dist, int thread, Make&& make) {
    std::lock_guard<std::mutex> l(mu_);
    std::unique_ptr<const KeyTrace>& slot = traces_[{mix, static_cast<int>(dist), thread}];
    if (!slot) slot = std::make_unique<const KeyTrace>(make());
    return *slot;
  }

 private:
  std::mutex mu_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<const KeyTrace>> traces_;  // guarded by mu_
};

// `count` distinct random 64-bit keys (never 0 or ~0, which maps sometimes
// reserve) for which keep(key) is true; keep is called at most once per
// distinct key, in order. Deterministic for a given seed. The
// rank of a key is its position, so hot Zipf keys are spread over the hash
// space.
template <typename Keep>
std::vector<uint64_t> MakeKeys(size_t count, uint64_t seed, Keep keep) {
  std::mt19937_64 gen(seed);
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(count);
  std::vector<uint64_t> keys;
  keys.reserve(count);
  while (keys.size() < count) {
    const uint64_t k = gen();
    if (k == 0 || k == ~uint64_t{0} || !seen.insert(k).second || !keep(k)) continue;
    keys.push_back(k);
  }
  return keys;
}

// `keys` in a deterministic pseudo-random order (for filling node-based
// baselines without giving them the locality of the keys' rank order).
inline std::vector<uint64_t> Shuffled(std::vector<uint64_t> keys, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::shuffle(keys.begin(), keys.end(), gen);
  return keys;
}

}  // namespace bench

#endif  // BENCH_ZIPF_H_
