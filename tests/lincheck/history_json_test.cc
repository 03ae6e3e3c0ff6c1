// JSON reader and the history JSON-lines format: round trips and errors.

#include "tests/lincheck/history_json.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/json.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

// --- json.h ---------------------------------------------------------------

TEST(JsonTest, ParsesValues) {
  absl::StatusOr<JsonValue> v = ParseJson(
      R"( {"a": [1, -2, 9223372036854775807, -9223372036854775808],
           "b": "x\"\\\/\n\u00e9\ud83d\ude00", "c": null, "d": true,
           "e": false, "f": 1.5e3, "g": {}, "h": []} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, JsonValue::Kind::kObject);
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 4);
  EXPECT_EQ(a->array[1].int_value, -2);
  EXPECT_EQ(a->array[2].int_value, INT64_MAX);
  EXPECT_EQ(a->array[3].int_value, INT64_MIN);
  EXPECT_EQ(v->Find("b")->string_value, "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v->Find("c")->kind, JsonValue::Kind::kNull);
  EXPECT_TRUE(v->Find("d")->bool_value);
  EXPECT_EQ(v->Find("e")->kind, JsonValue::Kind::kBool);
  EXPECT_EQ(v->Find("f")->kind, JsonValue::Kind::kDouble);
  EXPECT_EQ(v->Find("f")->double_value, 1500);
  EXPECT_EQ(v->Find("g")->kind, JsonValue::Kind::kObject);
  EXPECT_EQ(v->Find("h")->kind, JsonValue::Kind::kArray);
  EXPECT_EQ(v->Find("zzz"), nullptr);
}

TEST(JsonTest, IntegerOverflowBecomesDouble) {
  absl::StatusOr<JsonValue> v = ParseJson("9223372036854775808");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind, JsonValue::Kind::kDouble);
}

TEST(JsonTest, ErrorsNameTheColumn) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"", "column 1: expected a value"},
      {"{\"a\" 1}", "column 6: expected ':'"},
      {"{\"a\":1,}", "column 8: expected a member name"},
      {"[1 2]", "column 4: expected ',' or ']'"},
      {"\"abc", "unterminated string"},
      {"\"a\\qb\"", "column 3: unknown escape"},
      {"\"\\ud800\"", "unpaired surrogate"},
      {"01", "column 2: unexpected text"},
      {"-", "expected a digit"},
      {"1.", "expected a digit after '.'"},
      {"tru", "expected a value"},
      {"\"a\tb\"", "control character"},
      {"{} x", "column 4: unexpected text"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JsonValue> v = ParseJson(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(v.status().message(), c.error))
        << c.text << " -> " << v.status();
  }
}

TEST(JsonTest, DeepNestingIsRejected) {
  EXPECT_FALSE(ParseJson(std::string(100, '[') + std::string(100, ']')).ok());
  EXPECT_TRUE(ParseJson(std::string(50, '[') + std::string(50, ']')).ok());
}

TEST(JsonTest, StringsRoundTrip) {
  const std::string text = std::string("a\"b\\c\nd\te\x01\x1f") + "\xc3\xa9";
  std::string json;
  AppendJsonString(text, json);
  absl::StatusOr<JsonValue> v = ParseJson(json);
  ASSERT_TRUE(v.ok()) << json;
  EXPECT_EQ(v->string_value, text);
}

// --- history_json.h ---------------------------------------------------------

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
       "line 2: column 7: expected ':'"},
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
