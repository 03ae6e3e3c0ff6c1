#include "tests/lincheck/verdict.h"

namespace lincheck {

absl::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kIllegal:
      return "illegal";
    case Verdict::kUnknown:
      return "unknown";
  }
  return "?";
}

}  // namespace lincheck
