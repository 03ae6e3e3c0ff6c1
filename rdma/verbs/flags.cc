#include "rdma/verbs/flags.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rdma::verbs {

namespace {

// "auto" -> auto_value; else an integer in [lo, hi].
absl::Status ParseIntFlag(absl::string_view flag, absl::string_view value, int lo, int hi, int auto_value,
                          int* out) {
  if (value == "auto") {
    *out = auto_value;
    return absl::OkStatus();
  }
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", value, ": expected an integer in ", lo, "..", hi, " or 'auto'"));
  }
  *out = v;
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceFlags::Extract(int* argc, char** argv) {
  int out = 0;
  for (int i = 0; i < *argc; ++i) {
    absl::string_view a = argv[i];
    absl::string_view name;
    for (absl::string_view f : {"device", "port", "gid-index"}) {
      const std::string dashed = absl::StrCat("--", f);
      if (a == dashed || absl::string_view(a).substr(0, dashed.size() + 1) == dashed + "=") name = f;
    }
    // argv[0] is the program, never a flag.
    if (i == 0 || name.empty()) {
      argv[out++] = argv[i];
      continue;
    }
    absl::string_view value;
    if (a.size() > name.size() + 2) {
      value = a.substr(name.size() + 3);
    } else if (i + 1 < *argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    if (name == "device") {
      if (value.empty() || value.front() == '-') {
        return absl::InvalidArgumentError(absl::StrCat("--device needs a device name (got '", value, "')"));
      }
      device = std::string(value);
    } else if (name == "port") {
      if (absl::Status s = ParseIntFlag(name, value, 1, 255, 0, &port); !s.ok()) return s;
    } else {
      if (absl::Status s = ParseIntFlag(name, value, 0, 255, -1, &gid_index); !s.ok()) return s;
    }
    given = true;
  }
  *argc = out;
  argv[out] = nullptr;
  return absl::OkStatus();
}

absl::Status DeviceFlags::Apply(FabricOptions* options) const {
  if (given) {
    if (options->kind == FabricKind::kSoft) {
      return absl::InvalidArgumentError(
          "--device/--port/--gid-index select a verbs device; they cannot be used with --fabric=soft");
    }
    options->kind = FabricKind::kVerbs;
  }
  options->device = device;
  options->port = port;
  options->gid_index = gid_index;
  return absl::OkStatus();
}

}  // namespace rdma::verbs
