#include "tests/lincheck/history_json.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace lincheck {
namespace {

// ordered_json keeps members in input order, so a line with several faults
// reports the first one, and written lines keep the documented member order.
using Json = nlohmann::ordered_json;

constexpr absl::string_view kFormat = "lincheck-history";
constexpr int64_t kVersion = 1;

// nlohmann's type name, except that integers are "integer" (its "number"
// covers both, and the schema only accepts integers).
std::string KindName(const Json& value) {
  return value.is_number_integer() ? "integer" : value.type_name();
}

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("\"", field, "\" ", what));
}

// An int64 member. nlohmann stores non-negative integers as uint64, so those
// above INT64_MAX arrive here and are out of range.
absl::StatusOr<int64_t> GetInt(const Json& value, absl::string_view field) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(field, "is out of range");
    }
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return FieldError(field, absl::StrCat("must be an integer, not ", KindName(value)));
}

absl::StatusOr<int> GetSmallInt(const Json& value, absl::string_view field) {
  absl::StatusOr<int64_t> v = GetInt(value, field);
  if (!v.ok()) return v.status();
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return FieldError(field, "is out of range");
  }
  return static_cast<int>(*v);
}

absl::Status GetValues(const Json& value, absl::string_view field, Values& out) {
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_array()) {
    return FieldError(field, absl::StrCat("must be an array of integers, not ",
                                          KindName(value)));
  }
  for (const Json& item : value) {
    if (!item.is_number_integer()) return FieldError(field, "must hold only integers");
    absl::StatusOr<int64_t> v = GetInt(item, field);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return absl::OkStatus();
}

absl::Status ParseOperation(const Json& line, Operation& op) {
  bool has_op = false, has_invoke = false;
  for (const auto& [name, value] : line.items()) {
    if (name == "thread" || name == "node") {
      absl::StatusOr<int> v = GetSmallInt(value, name);
      if (!v.ok()) return v.status();
      (name == "thread" ? op.thread : op.node) = *v;
    } else if (name == "path") {
      std::optional<Path> path;
      if (value.is_string()) path = ParsePath(value.get_ref<const std::string&>());
      if (!path) {
        return FieldError(name, "must be \"native\", \"loopback\" or \"remote\"");
      }
      op.path = *path;
    } else if (name == "op") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        return FieldError(name, "must be a non-empty string");
      }
      op.op = value.get<std::string>();
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
      if (value.is_null()) {
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

absl::Status ParseHeader(const Json& line, JsonHistory& out) {
  const Json& format = *line.find("format");
  if (!format.is_string() || format.get_ref<const std::string&>() != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"format\" must be \"", kFormat, "\""));
  }
  if (auto version = line.find("version"); version != line.end()) {
    if (!version->is_number_integer() || *version != kVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported \"version\" (this reader knows ", kVersion, ")"));
    }
  }
  if (auto model = line.find("model"); model != line.end()) {
    if (!model->is_string()) return FieldError("model", "must be a string");
    out.model = model->get<std::string>();
  }
  return absl::OkStatus();
}

// "column N: <what>" from nlohmann's "[json.exception.parse_error.101] parse
// error at line 1, column N: <what>". N counts bytes from 1 and is where the
// parser stopped: the end of the offending token.
absl::Status SyntaxError(const nlohmann::json::parse_error& e) {
  absl::string_view what = e.what();
  if (size_t at = what.find("column "); at != absl::string_view::npos) {
    if (size_t colon = what.find(": ", at); colon != absl::string_view::npos) {
      what.remove_prefix(colon + 2);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("column ", e.byte, ": ", what));
}

// One line as a JSON value. nlohmann reports syntax errors by exception; they
// stop here and leave as a Status.
absl::StatusOr<Json> ParseLine(absl::string_view line) {
  try {
    return Json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::parse_error& e) {
    return SyntaxError(e);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

// One compact line. Invalid UTF-8 in a string is written as U+FFFD rather than
// throwing, so every line written is one the reader accepts.
void AppendLine(const Json& line, std::string& out) {
  out += line.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  out += '\n';
}

Json ValuesJson(const Values& values) {
  Json array = Json::array();
  for (int64_t v : values) array.push_back(v);
  return array;
}

}  // namespace

std::string ToJsonLines(const History& history, absl::string_view model) {
  std::string out;
  out.reserve(160 * history.size() + 80);
  if (!model.empty()) {
    Json header;
    header["format"] = std::string(kFormat);
    header["version"] = kVersion;
    header["model"] = std::string(model);
    AppendLine(header, out);
  }
  for (const Operation& op : history) {
    Json line;
    line["thread"] = op.thread;
    line["node"] = op.node;
    line["path"] = PathName(op.path);
    line["op"] = op.op;
    line["args"] = ValuesJson(op.args);
    line["result"] = ValuesJson(op.result);
    line["invoke_ns"] = op.invoke_ns;
    line["response_ns"] = op.pending() ? Json(nullptr) : Json(op.response_ns);
    AppendLine(line, out);
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
    absl::StatusOr<Json> value = ParseLine(line);
    if (!value.ok()) return fail(value.status());
    if (!value->is_object()) {
      return fail(absl::InvalidArgumentError("expected a JSON object"));
    }
    if (value->contains("format")) {
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
