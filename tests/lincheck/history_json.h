#ifndef TESTS_LINCHECK_HISTORY_JSON_H_
#define TESTS_LINCHECK_HISTORY_JSON_H_

// Histories as JSON lines, so a failing history can be saved, replayed with
// lincheck_cli and re-verified by an independent checker (recheck.py).
// The schema is documented in README.md ("JSON lines format"); in short:
//
//   {"format":"lincheck-history","version":1,"model":"map"}        optional header
//   {"thread":0,"node":0,"path":"native","op":"put","args":[7,1],
//    "result":[0,0],"invoke_ns":1200,"response_ns":1850}           one per operation
//
// A pending operation has "response_ns":null (or omits it) and no result.
//
// Lines are read and written with nlohmann-json (Debian nlohmann-json3-dev).

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/lincheck/history.h"

namespace lincheck {

struct JsonHistory {
  std::string model;  // from the header; empty if absent
  History history;
};

// One header line (when `model` is non-empty) then one line per operation,
// in the given order. Every line ends with '\n'.
std::string ToJsonLines(const History& history, absl::string_view model = "");

// Inverse of ToJsonLines. Blank lines are skipped. Errors are InvalidArgument
// (never an exception) and name the line: for malformed JSON also the byte
// column where parsing stopped and the parser's reason, e.g.
// "line 3: column 17: syntax error while parsing object separator - ...;
// expected ':'"; for schema faults the member, e.g. "line 4: missing \"op\"".
// Operation lines may not carry unknown members; header lines may (for
// metadata such as a seed or test name).
absl::StatusOr<JsonHistory> FromJsonLines(absl::string_view text);

// File forms; `path` "-" means stdin for reading.
absl::Status WriteJsonLinesFile(const std::string& path, const History& history,
                                absl::string_view model = "");
absl::StatusOr<JsonHistory> ReadJsonLinesFile(const std::string& path);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_HISTORY_JSON_H_
