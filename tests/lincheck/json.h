#ifndef TESTS_LINCHECK_JSON_H_
#define TESTS_LINCHECK_JSON_H_

// A small JSON reader and writer helpers, enough for the history format
// (history_json.h). The reader accepts any RFC 8259 value; numbers written
// without a fraction or exponent that fit an int64 are kept exact.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lincheck {

struct JsonValue {
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool bool_value = false;
  int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in input order

  // The member named `key` of an object (the last one if repeated), or null.
  const JsonValue* Find(absl::string_view key) const;
};

// "null", "boolean", "integer", "number", "string", "array" or "object".
absl::string_view JsonKindName(JsonValue::Kind kind);

// Parses one complete JSON text (surrounding whitespace allowed). Errors are
// InvalidArgument and start with "column N: ", N counting bytes from 1.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// Appends `text` as a quoted JSON string, escaping as needed.
void AppendJsonString(absl::string_view text, std::string& out);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_JSON_H_
