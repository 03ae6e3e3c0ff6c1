#include "tests/lincheck/history_json.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/lincheck/json.h"

namespace lincheck {
namespace {

constexpr absl::string_view kFormat = "lincheck-history";
constexpr int64_t kVersion = 1;

void AppendValues(const Values& values, std::string& out) {
  absl::StrAppend(&out, "[", absl::StrJoin(values, ","), "]");
}

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" ", what));
}

absl::StatusOr<int64_t> GetInt(const JsonValue& value, absl::string_view field) {
  if (value.kind != JsonValue::Kind::kInt) {
    return FieldError(field, absl::StrCat("must be an integer, not ",
                                          JsonKindName(value.kind)));
  }
  return value.int_value;
}

absl::StatusOr<int> GetSmallInt(const JsonValue& value, absl::string_view field) {
  absl::StatusOr<int64_t> v = GetInt(value, field);
  if (!v.ok()) return v.status();
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return FieldError(field, "is out of range");
  }
  return static_cast<int>(*v);
}

absl::Status GetValues(const JsonValue& value, absl::string_view field, Values& out) {
  if (value.kind == JsonValue::Kind::kNull) return absl::OkStatus();
  if (value.kind != JsonValue::Kind::kArray) {
    return FieldError(field, absl::StrCat("must be an array of integers, not ",
                                          JsonKindName(value.kind)));
  }
  for (const JsonValue& item : value.array) {
    if (item.kind != JsonValue::Kind::kInt) {
      return FieldError(field, "must hold only integers");
    }
    out.push_back(item.int_value);
  }
  return absl::OkStatus();
}

absl::Status ParseOperation(const JsonValue& line, Operation& op) {
  bool has_op = false, has_invoke = false;
  for (const auto& [name, value] : line.object) {
    if (name == "thread" || name == "node") {
      absl::StatusOr<int> v = GetSmallInt(value, name);
      if (!v.ok()) return v.status();
      (name == "thread" ? op.thread : op.node) = *v;
    } else if (name == "path") {
      std::optional<Path> path;
      if (value.kind == JsonValue::Kind::kString) path = ParsePath(value.string_value);
      if (!path) {
        return FieldError(name, "must be \"native\", \"loopback\" or \"remote\"");
      }
      op.path = *path;
    } else if (name == "op") {
      if (value.kind != JsonValue::Kind::kString || value.string_value.empty()) {
        return FieldError(name, "must be a non-empty string");
      }
      op.op = value.string_value;
      has_op = true;
    } else if (name == "args") {
      op.args.clear();
      if (absl::Status s = GetValues(value, name, op.args); !s.ok()) return s;
    } else if (name == "result") {
      op.result.clear();
      if (absl::Status s = GetValues(value, name, op.result); !s.ok()) return s;
    } else if (name == "invoke_ns") {
      absl::StatusOr<int64_t> v = GetInt(value, name);
      if (!v.ok()) return v.status();
      op.invoke_ns = *v;
      has_invoke = true;
    } else if (name == "response_ns") {
      if (value.kind == JsonValue::Kind::kNull) {
        op.response_ns = kPendingNs;
        continue;
      }
      absl::StatusOr<int64_t> v = GetInt(value, name);
      if (!v.ok()) return v.status();
      if (*v == kPendingNs) return FieldError(name, "is out of range (use null)");
      op.response_ns = *v;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown member \"", name, "\" in an operation"));
    }
  }
  if (!has_op) return absl::InvalidArgumentError("missing \"op\"");
  if (!has_invoke) return absl::InvalidArgumentError("missing \"invoke_ns\"");
  if (op.pending() && !op.result.empty()) {
    return absl::InvalidArgumentError(
        "a pending operation (response_ns null or absent) has no result");
  }
  if (op.response_ns < op.invoke_ns) {
    return absl::InvalidArgumentError("\"response_ns\" precedes \"invoke_ns\"");
  }
  return absl::OkStatus();
}

absl::Status ParseHeader(const JsonValue& line, JsonHistory& out) {
  const JsonValue* format = line.Find("format");
  if (format->kind != JsonValue::Kind::kString || format->string_value != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"format\" must be \"", kFormat, "\""));
  }
  if (const JsonValue* version = line.Find("version")) {
    if (version->kind != JsonValue::Kind::kInt || version->int_value != kVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported \"version\" (this reader knows ", kVersion, ")"));
    }
  }
  if (const JsonValue* model = line.Find("model")) {
    if (model->kind != JsonValue::Kind::kString) {
      return FieldError("model", "must be a string");
    }
    out.model = model->string_value;
  }
  return absl::OkStatus();
}

}  // namespace

std::string ToJsonLines(const History& history, absl::string_view model) {
  std::string out;
  out.reserve(160 * history.size() + 80);
  if (!model.empty()) {
    absl::StrAppend(&out, "{\"format\":\"", kFormat, "\",\"version\":", kVersion,
                    ",\"model\":");
    AppendJsonString(model, out);
    out += "}\n";
  }
  for (const Operation& op : history) {
    absl::StrAppend(&out, "{\"thread\":", op.thread, ",\"node\":", op.node,
                    ",\"path\":\"", PathName(op.path), "\",\"op\":");
    AppendJsonString(op.op, out);
    out += ",\"args\":";
    AppendValues(op.args, out);
    out += ",\"result\":";
    AppendValues(op.result, out);
    absl::StrAppend(&out, ",\"invoke_ns\":", op.invoke_ns, ",\"response_ns\":");
    if (op.pending()) {
      out += "null";
    } else {
      absl::StrAppend(&out, op.response_ns);
    }
    out += "}\n";
  }
  return out;
}

absl::StatusOr<JsonHistory> FromJsonLines(absl::string_view text) {
  JsonHistory out;
  int line_number = 0;
  bool seen_operation = false, seen_header = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    auto fail = [&](const absl::Status& status) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": ", status.message()));
    };
    absl::StatusOr<JsonValue> value = ParseJson(line);
    if (!value.ok()) return fail(value.status());
    if (value->kind != JsonValue::Kind::kObject) {
      return fail(absl::InvalidArgumentError("expected a JSON object"));
    }
    if (value->Find("format") != nullptr) {
      if (seen_operation || seen_header) {
        return fail(absl::InvalidArgumentError(
            "a header line may only come first"));
      }
      if (absl::Status s = ParseHeader(*value, out); !s.ok()) return fail(s);
      seen_header = true;
      continue;
    }
    Operation op;
    if (absl::Status s = ParseOperation(*value, op); !s.ok()) return fail(s);
    out.history.push_back(std::move(op));
    seen_operation = true;
  }
  return out;
}

absl::Status WriteJsonLinesFile(const std::string& path, const History& history,
                                absl::string_view model) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot create ", path));
  file << ToJsonLines(history, model);
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<JsonHistory> ReadJsonLinesFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a JSON lines file"));
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    text.assign(std::istreambuf_iterator<char>(file), {});
    if (file.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  }
  absl::StatusOr<JsonHistory> parsed = FromJsonLines(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace lincheck
