#ifndef TESTS_STRUCTURES_MAP_MUTANT_UTIL_H_
#define TESTS_STRUCTURES_MAP_MUTANT_UTIL_H_

// What every map mutant test does (hash map, ordered map): run a recorded
// stress on a mutant map up to kMutantAttempts times (the seed varies) until
// lincheck says illegal or the map's own integrity check (DataLoss) fires;
// and run the real map on the same workload (the control), which must pass,
// so that the catch is due to the mutation. Also what both maps' linearizability
// tests share: a run checked by lincheck (ExpectLinearizable), and one in
// which a remote writer dies mid-operation (ExpectLinearizableWithACrash).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/map_stress.h"

namespace structures::testing {

inline constexpr int kMutantAttempts = 5;

template <typename Model>
lincheck::Verdict CheckVerdict(const Model& model, const StressResult& r) {
  lincheck::CheckOptions o;
  o.timeout = absl::Seconds(20);
  auto result = lincheck::Check(model, r.history, o);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return lincheck::Verdict::kUnknown;
  if (result->verdict == lincheck::Verdict::kIllegal) {
    std::printf("%s\n", result->report.substr(0, 3000).c_str());
  }
  return result->verdict;
}

template <typename MutantMap, typename Model>
bool Caught(StressConfig cfg, const char* name, const Model& model) {
  for (int attempt = 1; attempt <= kMutantAttempts; ++attempt) {
    cfg.seed = 100 + attempt;
    StressResult r = RunMapStress<MutantMap>(cfg);
    // The map's own integrity check fired: caught, no need to search the
    // history (whose failed operations stay pending, which makes it slow).
    const lincheck::Verdict v = r.data_loss > 0 ? lincheck::Verdict::kUnknown : CheckVerdict(model, r);
    std::printf("%s attempt %d: %llu ops, verdict %s, %llu errors (%llu DataLoss)%s%s\n", name, attempt,
                static_cast<unsigned long long>(r.history.size()), lincheck::VerdictName(v).data(),
                static_cast<unsigned long long>(r.errors), static_cast<unsigned long long>(r.data_loss),
                r.first_error.empty() ? "" : ": ", r.first_error.c_str());
    if (v == lincheck::Verdict::kIllegal || r.data_loss > 0) return true;
  }
  return false;
}

// Runs `cfg` on Map and expects no errors, a non-trivial history, and
// linearizability under `model`. Returns the result.
template <typename Map, typename Model>
StressResult ExpectLinearizable(const StressConfig& cfg, const Model& model, absl::Duration timeout,
                                const char* label) {
  StressResult r = RunMapStress<Map>(cfg);
  std::printf("%s%llu ops, %llu torn reads retried, %llu reads under the lock\n", label,
              static_cast<unsigned long long>(r.history.size()), static_cast<unsigned long long>(r.torn_reads),
              static_cast<unsigned long long>(r.locked_reads));
  EXPECT_EQ(r.errors, 0u) << r.first_error;
  EXPECT_GT(r.history.size(), cfg.workers.size() * 10);
  lincheck::CheckOptions o;
  o.timeout = timeout;
  EXPECT_TRUE(lincheck::IsLinearizable(model, r.history, o));
  return r;
}

// The real map on the same workload: linearizable, no errors. Returns its result.
template <typename Map, typename Model>
StressResult ExpectControlPasses(StressConfig cfg, const Model& model) {
  cfg.seed = 7;
  return ExpectLinearizable<Map>(cfg, model, absl::Seconds(20), "control: ");
}

// Two keys on node 0 (`base` sets the nodes and their ranges); native and
// NIC writers on them; every NIC op takes 20 µs longer, so NIC critical
// sections are wide: the writers' races a mutant loses.
inline StressConfig WriterRaceConfig(StressConfig c, bool byte_copies) {
  c.byte_granular_copies = byte_copies;
  c.nodes = 3;
  c.home = 0;
  c.num_keys = 2;
  c.hot_keys = 0;
  const auto think = std::chrono::microseconds(100);  // spreads native ops over the NIC writers' run
  c.workers = {{0, Path::kAuto, StressWorker::kWriter, think},
               {0, Path::kAuto, StressWorker::kMixed, think},
               {1, Path::kAuto, StressWorker::kWriter},
               {2, Path::kAuto, StressWorker::kMixed}};
  c.soft_latency = std::chrono::microseconds(20);
  c.ops_per_worker = 400;
  c.duration = std::chrono::milliseconds(1500);
  return c;
}


// A remote writer's node dies mid-operation (a crash point after its NIC's
// k-th work request, k varied by seed) while native, loopback and remote
// workers use the same keys of node 0: its last operation stays pending
// (the checker may take it or leave it out), node 0's repair releases and
// fixes what it held, and everyone else's history stays linearizable. Plain
// and byte-by-byte copies, two seeds each.
template <typename Map, typename Model>
void ExpectLinearizableWithACrash(const std::string& backend, const Model& model) {
  for (bool bytes : {false, true}) {
    for (uint64_t seed : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << (bytes ? "byte copies" : "word copies") << ", seed " << seed);
      StressConfig c;
      c.backend = backend;
      c.nodes = 3;
      c.home = 0;
      c.num_keys = 8;
      c.hot_keys = 2;
      c.groups_per_node = 2;
      c.workers = MixedPathWorkers(c.backend);
      c.byte_granular_copies = bytes;
      c.crash_node = 2;
      c.crash_after_wrs = 150 + 61 * seed + (bytes ? 17 : 0);
      c.ops_per_worker = 2000;
      c.duration = std::chrono::milliseconds(1500);
      c.seed = 40 + seed;
      const StressResult r = ExpectLinearizable<Map>(c, model, absl::Seconds(20), "");
      EXPECT_EQ(r.crashed, 1u) << "node 2's worker did not die in an operation";
    }
  }
}

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_MAP_MUTANT_UTIL_H_
