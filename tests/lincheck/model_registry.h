#ifndef TESTS_LINCHECK_MODEL_REGISTRY_H_
#define TESTS_LINCHECK_MODEL_REGISTRY_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// The bundled models by name, as the CLI and JSON headers spell them:
// "register", "map", "ordered_map", "ordered_set", "queue" (default
// configurations: register initially 0, unbounded queue).
absl::StatusOr<std::unique_ptr<Model>> MakeModel(absl::string_view name);

std::vector<absl::string_view> ModelNames();

}  // namespace lincheck

#endif  // TESTS_LINCHECK_MODEL_REGISTRY_H_
