// The history JSON-lines format: round trips and errors.

#include "tests/lincheck/history_json.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

History Sample() {
  History history = {
      Op(0, 100, 200, "put", {1, -5}, {0, 0}),
      Op(1, 150, 150, "get", {1}, {1, -5}),
      PendingOp(2, 300, "erase", {1}),
      Op(3, INT64_MIN + 1, INT64_MAX - 1, "weird \"name\"", {INT64_MIN, INT64_MAX}, {}),
  };
  history[1].node = 3;
  history[1].path = Path::kRemote;
  history[2].path = Path::kLoopback;
  return history;
}

TEST(HistoryJsonTest, RoundTrip) {
  const History history = Sample();
  const std::string text = ToJsonLines(history, "map");
  absl::StatusOr<JsonHistory> back = FromJsonLines(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "map");
  EXPECT_EQ(back->history, history);
  // And again, byte for byte.
  EXPECT_EQ(ToJsonLines(back->history, back->model), text);
}

TEST(HistoryJsonTest, DocumentedLineFormat) {
  const std::string text = ToJsonLines({Op(0, 1200, 1850, "put", {7, 1}, {0, 0}),
                                        PendingOp(1, 1300, "get", {7})},
                                       "map");
  EXPECT_EQ(text,
            "{\"format\":\"lincheck-history\",\"version\":1,\"model\":\"map\"}\n"
            "{\"thread\":0,\"node\":0,\"path\":\"native\",\"op\":\"put\",\"args\":[7,1],"
            "\"result\":[0,0],\"invoke_ns\":1200,\"response_ns\":1850}\n"
            "{\"thread\":1,\"node\":0,\"path\":\"native\",\"op\":\"get\",\"args\":[7],"
            "\"result\":[],\"invoke_ns\":1300,\"response_ns\":null}\n");
}

TEST(HistoryJsonTest, GeneratedHistoriesRoundTripAndKeepTheirVerdict) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    GeneratorOptions options;
    options.seed = seed;
    options.ops = 500;
    options.pending_probability = 0.5;
    History history = GenerateQueueHistory(options);
    if (seed % 2 == 0) CorruptOneResult(history, seed);
    absl::StatusOr<JsonHistory> back = FromJsonLines(ToJsonLines(history, "queue"));
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->history, history);
    EXPECT_EQ(VerdictOf(QueueModel(), back->history), VerdictOf(QueueModel(), history));
  }
}

TEST(HistoryJsonTest, HeaderIsOptionalAndMayCarryMetadata) {
  absl::StatusOr<JsonHistory> back = FromJsonLines(
      "\n{\"op\":\"get\",\"args\":[1],\"result\":[0,0],\"invoke_ns\":5,\"response_ns\":6}\n\n");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "");
  ASSERT_EQ(back->history.size(), 1);
  EXPECT_EQ(back->history[0].thread, 0);
  EXPECT_EQ(back->history[0].path, Path::kNative);

  back = FromJsonLines(
      "{\"format\":\"lincheck-history\",\"version\":1,\"model\":\"queue\","
      "\"seed\":42,\"test\":\"QueueStress\"}\r\n");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "queue");
  EXPECT_TRUE(back->history.empty());
}

TEST(HistoryJsonTest, ErrorsNameTheLine) {
  struct Case {
    std::string text;
    const char* error;
  } cases[] = {
      {"{\"op\":\"get\",\"invoke_ns\":1,\"response_ns\":2}\n{\"op\" \"get\"}",
       "line 2: column 11: syntax error while parsing object separator - "
       "unexpected string literal; expected ':'"},
      {"[1,2]", "line 1: expected a JSON object"},
      {"{\"invoke_ns\":1}", "line 1: missing \"op\""},
      {"{\"op\":\"get\"}", "missing \"invoke_ns\""},
      {"{\"op\":\"get\",\"invoke_ns\":1,\"respnse_ns\":2}", "unknown member \"respnse_ns\""},
      {"{\"op\":\"get\",\"invoke_ns\":1.5}", "\"invoke_ns\" must be an integer"},
      {"{\"op\":\"get\",\"invoke_ns\":1,\"args\":[\"k\"]}", "\"args\" must hold only integers"},
      {"{\"op\":\"get\",\"invoke_ns\":1,\"path\":\"rdma\"}", "\"path\" must be"},
      {"{\"op\":\"get\",\"invoke_ns\":5,\"response_ns\":4}", "precedes"},
      {"{\"op\":\"get\",\"invoke_ns\":5,\"result\":[1]}", "pending operation"},
      {"{\"op\":\"get\",\"invoke_ns\":1,\"thread\":99999999999}", "\"thread\" is out of range"},
      {"{\"op\":\"get\",\"invoke_ns\":9223372036854775808}", "\"invoke_ns\" is out of range"},
      {"{\"op\":\"get\",\"invoke_ns\":1,\"args\":5}", "\"args\" must be an array of integers, not integer"},
      {"{\"format\":\"other\"}", "\"format\" must be \"lincheck-history\""},
      {"{\"format\":\"lincheck-history\",\"version\":2}", "unsupported \"version\""},
      {"{\"op\":\"get\",\"invoke_ns\":1}\n{\"format\":\"lincheck-history\"}",
       "line 2: a header line may only come first"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JsonHistory> back = FromJsonLines(c.text);
    ASSERT_FALSE(back.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(back.status().message(), c.error))
        << c.text << " -> " << back.status();
  }
}

// Malformed JSON is an InvalidArgument naming the line, the column (in bytes
// from 1, where the parser stopped) and the fault; no exception escapes.
TEST(HistoryJsonTest, SyntaxErrorsNameLineColumnAndFault) {
  struct Case {
    std::string text;
    const char* error;
  } cases[] = {
      {"{\"a\" 1}", "line 1: column 6: "},
      {"{\"a\":1,}", "expected string literal"},
      {"[1 2]", "expected ']'"},
      {"\"abc", "missing closing quote"},
      {"\"a\\qb\"", "forbidden character after backslash"},
      {"\"\\ud800\"", "surrogate"},
      {"01", "line 1: column 2: "},
      {"-", "expected digit after '-'"},
      {"1.", "expected digit after '.'"},
      {"tru", "invalid literal"},
      {"\"a\tb\"", "control character"},
      {"{} x", "expected end of input"},
      {"{\"op\":\"\xff\"}", "ill-formed UTF-8"},
      {"{\"op\":\"get\",\"invoke_ns\":1}\n\n{\"op\":", "line 3: column 7: syntax error"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JsonHistory> back = FromJsonLines(c.text);
    ASSERT_FALSE(back.ok()) << c.text;
    EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(back.status().message(), c.error))
        << c.text << " -> " << back.status();
  }
}

// Deep nesting parses without exhausting the stack and is then refused by the
// schema.
TEST(HistoryJsonTest, DeepNestingIsAnError) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<JsonHistory> back = FromJsonLines(deep);
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(), "expected a JSON object"));
  back = FromJsonLines("{\"op\":\"get\",\"invoke_ns\":1,\"args\":" + deep + "}");
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(), "must hold only integers"));
}

// Operation names with quotes, backslashes, control characters and UTF-8
// survive a round trip.
TEST(HistoryJsonTest, NamesRoundTrip) {
  const std::string name = std::string("a\"b\\c\nd\te\x01\x1f") + "\xc3\xa9";
  const History history = {Op(0, 1, 2, name, {}, {})};
  absl::StatusOr<JsonHistory> back = FromJsonLines(ToJsonLines(history));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->history, history);
}

TEST(HistoryJsonTest, FileRoundTrip) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/history.jsonl";
  const History history = Sample();
  ASSERT_TRUE(WriteJsonLinesFile(path, history, "map").ok());
  absl::StatusOr<JsonHistory> back = ReadJsonLinesFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->history, history);
  std::remove(path.c_str());
  absl::StatusOr<JsonHistory> missing = ReadJsonLinesFile(path);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// A failing history saved to a file replays to the same verdict and report.
TEST(HistoryJsonTest, SavedFailureReplays) {
  const History history = {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(1, 20, 30, "get", {1}, {0, 0}),
  };
  absl::StatusOr<CheckResult> before = Check(MapModel(), history);
  absl::StatusOr<JsonHistory> back = FromJsonLines(ToJsonLines(history, "map"));
  ASSERT_TRUE(back.ok());
  absl::StatusOr<CheckResult> after = Check(MapModel(), back->history);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(after->verdict, Verdict::kIllegal);
  EXPECT_EQ(after->report, before->report);
}

}  // namespace
}  // namespace lincheck
