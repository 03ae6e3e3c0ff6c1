#include "tests/lincheck/json.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lincheck {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue value;
    if (absl::Status s = ParseValue(0, value); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the value");
    return value;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("column ", pos_ + 1, ": ", what));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    return Error(pos_ < text_.size() ? absl::StrFormat("expected '%c'", c)
                                     : absl::StrFormat("expected '%c' before the end", c));
  }

  absl::Status ParseValue(int depth, JsonValue& out) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a value before the end");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      out.kind = JsonValue::Kind::kString;
      return ParseString(out.string_value);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    if (ConsumeWord("true")) {
      out.kind = JsonValue::Kind::kBool;
      out.bool_value = true;
      return absl::OkStatus();
    }
    if (ConsumeWord("false")) {
      out.kind = JsonValue::Kind::kBool;
      out.bool_value = false;
      return absl::OkStatus();
    }
    if (ConsumeWord("null")) {
      out.kind = JsonValue::Kind::kNull;
      return absl::OkStatus();
    }
    return Error("expected a value");
  }

  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseObject(int depth, JsonValue& out) {
    out.kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    if (Consume('}')) return absl::OkStatus();
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Error("expected a member name in double quotes");
      }
      std::string key;
      if (absl::Status s = ParseString(key); !s.ok()) return s;
      if (absl::Status s = Expect(':'); !s.ok()) return s;
      JsonValue value;
      if (absl::Status s = ParseValue(depth + 1, value); !s.ok()) return s;
      out.object.emplace_back(std::move(key), std::move(value));
      if (Consume('}')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseArray(int depth, JsonValue& out) {
    out.kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    if (Consume(']')) return absl::OkStatus();
    while (true) {
      JsonValue value;
      if (absl::Status s = ParseValue(depth + 1, value); !s.ok()) return s;
      out.array.push_back(std::move(value));
      if (Consume(']')) return absl::OkStatus();
      if (!Consume(',')) return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseNumber(JsonValue& out) {
    const size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("expected a digit");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) {
        return Error("expected a digit after '.'");
      }
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) {
        return Error("expected a digit in the exponent");
      }
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    const std::string token(text_.substr(start, pos_ - start));
    if (integral && absl::SimpleAtoi(token, &out.int_value)) {
      out.kind = JsonValue::Kind::kInt;
      return absl::OkStatus();
    }
    out.kind = JsonValue::Kind::kDouble;
    out.double_value = std::strtod(token.c_str(), nullptr);
    return absl::OkStatus();
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  // Four hex digits at pos_.
  absl::Status ParseHex4(uint32_t& code) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      code <<= 4;
      if (c >= '0' && c <= '9') {
        code |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        code |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        code |= c - 'A' + 10;
      } else {
        --pos_;
        return Error("bad hex digit in \\u escape");
      }
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  absl::Status ParseString(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string");
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t code = 0;
          if (absl::Status s = ParseHex4(code); !s.ok()) return s;
          if (code >= 0xD800 && code < 0xDC00) {
            uint32_t low = 0;
            if (!ConsumeWord("\\u")) return Error("unpaired surrogate in \\u escape");
            if (absl::Status s = ParseHex4(low); !s.ok()) return s;
            if (low < 0xDC00 || low >= 0xE000) {
              return Error("unpaired surrogate in \\u escape");
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code < 0xE000) {
            return Error("unpaired surrogate in \\u escape");
          }
          AppendUtf8(code, out);
          break;
        }
        default:
          pos_ -= 2;  // point at the backslash
          return Error("unknown escape in string");
      }
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  const JsonValue* found = nullptr;
  for (const auto& [name, value] : object) {
    if (name == key) found = &value;
  }
  return found;
}

absl::string_view JsonKindName(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kBool: return "boolean";
    case JsonValue::Kind::kInt: return "integer";
    case JsonValue::Kind::kDouble: return "number";
    case JsonValue::Kind::kString: return "string";
    case JsonValue::Kind::kArray: return "array";
    case JsonValue::Kind::kObject: return "object";
  }
  return "?";
}

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return Parser(text).ParseDocument();
}

void AppendJsonString(absl::string_view text, std::string& out) {
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace lincheck
