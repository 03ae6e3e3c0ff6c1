// Exported histories are re-verified by the independent checker recheck.py
// (Python standard library only, no code shared with the C++ checker), and
// the two must agree on every verdict. Skipped if python3 is unavailable.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/history_json.h"
#include "tests/lincheck/model_registry.h"

namespace lincheck {
namespace {

std::string Python() {
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  if (std::system("python3 -c pass >/dev/null 2>&1") == 0) return "python3";
  return "";
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// Runs recheck.py on the files; returns file -> verdict.
std::map<std::string, std::string> Recheck(const std::string& python,
                                           const std::vector<std::string>& files) {
  std::string command = absl::StrCat(python, " tests/lincheck/recheck.py");
  for (const std::string& f : files) absl::StrAppend(&command, " '", f, "'");
  std::map<std::string, std::string> verdicts;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return verdicts;
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  pclose(pipe);
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> parts = absl::StrSplit(line, absl::MaxSplits(": ", 1));
    std::string verdict(parts.second.substr(0, parts.second.find(' ')));
    verdicts[parts.first] = verdict;
  }
  return verdicts;
}

// Mutations that may or may not break linearizability: swap the results of
// two operations with the same name.
void SwapTwoResults(History& history, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, history.size() - 1);
  for (int attempt = 0; attempt < 20; ++attempt) {
    Operation& a = history[pick(rng)];
    Operation& b = history[pick(rng)];
    if (&a != &b && a.op == b.op && !a.pending() && !b.pending()) {
      std::swap(a.result, b.result);
      return;
    }
  }
}

// A history generator, and the model name both checkers know it by.
struct Kind {
  const char* model;
  History (*generate)(const GeneratorOptions&);
};

// Small seeded histories: 2-4 threads, `min_ops` + (0..19) operations over
// 1..`key_choices` keys and 3 values, with seed-dependent gaps, latencies and
// (every 4th seed) pending operations.
GeneratorOptions SmallHistoryOptions(uint64_t seed, int min_ops, int key_choices) {
  GeneratorOptions options;
  options.seed = seed;
  options.threads = 2 + seed % 3;
  options.ops = min_ops + seed % 20;
  options.keys = 1 + seed % key_choices;
  options.values = 3;
  options.max_gap_ns = 1 + seed % 40;
  options.max_latency_ns = 20 + (seed * 17) % 100;
  options.pending_probability = seed % 4 == 0 ? 0.5 : 0;
  return options;
}

TEST(RecheckTest, IndependentCheckerAgrees) {
  const std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "python3 not available";
  const Kind kinds[] = {
      {"register", GenerateRegisterHistory},
      {"map", GenerateMapHistory},
      {"ordered_map", GenerateOrderedMapHistory},
      {"ordered_set",
       [](const GeneratorOptions& o) { return GenerateOrderedSetHistory(o, true); }},
      {"queue", GenerateQueueHistory},
  };
  std::mt19937_64 rng(7);
  std::map<std::string, Verdict> expected;
  std::vector<std::string> files;
  for (const Kind& kind : kinds) {
    std::unique_ptr<Model> model = *MakeModel(kind.model);
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      History history = kind.generate(SmallHistoryOptions(seed, /*min_ops=*/5, /*key_choices=*/3));
      if (seed % 3 == 1) CorruptOneResult(history, seed);
      if (seed % 3 == 2) SwapTwoResults(history, rng);
      absl::StatusOr<CheckResult> result = Check(*model, history);
      ASSERT_TRUE(result.ok()) << result.status();
      const std::string path =
          absl::StrCat(TempDir(), "/", kind.model, "_", seed, ".jsonl");
      ASSERT_TRUE(WriteJsonLinesFile(path, history, kind.model).ok());
      expected[path] = result->verdict;
      files.push_back(path);
    }
  }
  std::map<std::string, std::string> verdicts = Recheck(python, files);
  ASSERT_EQ(verdicts.size(), files.size()) << "recheck.py did not answer for every file";
  int ok = 0, illegal = 0;
  for (const auto& [path, verdict] : expected) {
    EXPECT_EQ(verdicts[path], VerdictName(verdict)) << path;
    (verdict == Verdict::kOk ? ok : illegal)++;
  }
  EXPECT_GT(ok, 60);
  EXPECT_GT(illegal, 60);
}

// The stale-value corruption is illegal by construction; the independent
// checker must agree, on small histories with few values (so values repeat
// and the "every write of v precedes the overwrite" condition matters).
TEST(RecheckTest, StaleValueCorruptionsAreIllegalForBoth) {
  const std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "python3 not available";
  const Kind kinds[] = {{"register", GenerateRegisterHistory},
                        {"map", GenerateMapHistory}};
  std::vector<std::string> files;
  for (const Kind& kind : kinds) {
    std::unique_ptr<Model> model = *MakeModel(kind.model);
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      History history = kind.generate(SmallHistoryOptions(seed, /*min_ops=*/8, /*key_choices=*/2));
      if (CorruptWithStaleValue(history, seed) < 0) continue;
      absl::StatusOr<CheckResult> result = Check(*model, history);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->verdict, Verdict::kIllegal) << kind.model << " seed " << seed;
      const std::string path =
          absl::StrCat(TempDir(), "/stale_", kind.model, "_", seed, ".jsonl");
      ASSERT_TRUE(WriteJsonLinesFile(path, history, kind.model).ok());
      files.push_back(path);
    }
  }
  EXPECT_GT(files.size(), 30);
  std::map<std::string, std::string> verdicts = Recheck(python, files);
  ASSERT_EQ(verdicts.size(), files.size()) << "recheck.py did not answer for every file";
  for (const std::string& path : files) EXPECT_EQ(verdicts[path], "illegal") << path;
}

TEST(RecheckTest, RejectsMalformedInput) {
  const std::string python = Python();
  if (python.empty()) GTEST_SKIP() << "python3 not available";
  const std::string path = TempDir() + "/malformed.jsonl";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"format\":\"lincheck-history\",\"model\":\"map\"}\n{\"op\":\"put\"", f);
  std::fclose(f);
  EXPECT_EQ(Recheck(python, {path})[path], "bad");
}

}  // namespace
}  // namespace lincheck
