// lincheck_cli: replays a saved JSON-lines history through the checker.
//
//   bazel run //tests/lincheck:lincheck_cli -- --model=map /tmp/failing.jsonl
//
// Exit codes: 0 linearizable, 1 not linearizable, 3 unknown (timeout or
// memory bound), 2 bad usage or unreadable/malformed input.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_json.h"
#include "tests/lincheck/model_registry.h"

namespace lincheck {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitIllegal = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitUnknown = 3;

std::string Usage() {
  return absl::StrCat(
      "usage: lincheck_cli [flags] FILE\n"
      "\n"
      "Checks a history saved as JSON lines (schema: tests/lincheck/README.md)\n"
      "for linearizability. FILE may be - for standard input.\n"
      "\n"
      "flags:\n"
      "  --model=NAME     one of: ",
      absl::StrJoin(ModelNames(), ", "),
      "\n"
      "                   (default: the \"model\" of the file's header line)\n"
      "  --timeout=T      give up after T: seconds, or a duration such as 500ms\n"
      "                   or 2m (default 60)\n"
      "  --no_partition   check the history as a single partition\n"
      "  --generic        never use a model's fast decider (e.g. the queue's)\n"
      "  --quiet          print only the verdict line\n"
      "  --help           show this text\n"
      "\n"
      "exit status: 0 linearizable, 1 not linearizable, 3 unknown (timeout),\n"
      "             2 bad usage or malformed input\n");
}

struct Flags {
  std::string model;
  std::string file;
  CheckOptions options;
  bool quiet = false;
};

int BadUsage(absl::string_view message) {
  std::fprintf(stderr, "lincheck_cli: %s\n\n%s", std::string(message).c_str(),
               Usage().c_str());
  return kExitBadInput;
}

bool ParseTimeout(absl::string_view text, absl::Duration& out) {
  double seconds;
  if (absl::SimpleAtod(text, &seconds) && seconds >= 0) {
    out = absl::Seconds(seconds);
    return true;
  }
  return absl::ParseDuration(text, &out) && out >= absl::ZeroDuration();
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(Usage().c_str(), stdout);
      return kExitOk;
    }
    absl::string_view value = arg;
    if (absl::ConsumePrefix(&value, "--model=")) {
      flags.model = std::string(value);
    } else if (absl::ConsumePrefix(&value, "--timeout=")) {
      if (!ParseTimeout(value, flags.options.timeout)) {
        return BadUsage(absl::StrCat("bad --timeout value \"", value, "\""));
      }
    } else if (arg == "--no_partition") {
      flags.options.partition = false;
    } else if (arg == "--generic") {
      flags.options.allow_fast_decision = false;
    } else if (arg == "--quiet") {
      flags.quiet = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return BadUsage(absl::StrCat("unknown flag \"", arg, "\""));
    } else if (flags.file.empty()) {
      flags.file = std::string(arg);
    } else {
      return BadUsage("more than one FILE given");
    }
  }
  if (flags.file.empty()) return BadUsage("no FILE given");

  absl::StatusOr<JsonHistory> input = ReadJsonLinesFile(flags.file);
  if (!input.ok()) {
    std::fprintf(stderr, "lincheck_cli: %s\n",
                 std::string(input.status().message()).c_str());
    return kExitBadInput;
  }
  if (input->history.empty()) {
    // Linearizable, trivially; but a file without one operation is almost
    // surely the wrong file (or a recorder that never ran).
    std::fprintf(stderr, "lincheck_cli: %s holds no operation\n", flags.file.c_str());
    return kExitBadInput;
  }
  const std::string model_name = flags.model.empty() ? input->model : flags.model;
  if (model_name.empty()) {
    return BadUsage("no --model given and the file has no header naming one");
  }
  absl::StatusOr<std::unique_ptr<Model>> model = MakeModel(model_name);
  if (!model.ok()) return BadUsage(model.status().message());

  absl::StatusOr<CheckResult> result =
      Check(**model, input->history, flags.options);
  if (!result.ok()) {
    std::fprintf(stderr, "lincheck_cli: %s\n",
                 std::string(result.status().message()).c_str());
    return kExitBadInput;
  }
  std::printf("%s: %zu operations, %zu partitions, model %s, checked in %s\n",
              std::string(VerdictName(result->verdict)).c_str(),
              input->history.size(), result->num_partitions,
              model_name.c_str(),
              absl::FormatDuration(result->elapsed).c_str());
  if (!flags.quiet && result->verdict != Verdict::kOk) {
    std::fputs(result->report.c_str(), stdout);
  }
  switch (result->verdict) {
    case Verdict::kOk:
      return kExitOk;
    case Verdict::kIllegal:
      return kExitIllegal;
    case Verdict::kUnknown:
      return kExitUnknown;
  }
  return kExitUnknown;
}

}  // namespace
}  // namespace lincheck

int main(int argc, char** argv) { return lincheck::Main(argc, argv); }
