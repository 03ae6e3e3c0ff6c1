#include "tests/lincheck/model_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/ordered_set_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/register_model.h"

namespace lincheck {

std::vector<absl::string_view> ModelNames() {
  return {"register", "map", "ordered_map", "ordered_set", "queue"};
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(absl::string_view name) {
  if (name == "register") return std::make_unique<RegisterModel>();
  if (name == "map") return std::make_unique<MapModel>();
  if (name == "ordered_map") return std::make_unique<OrderedMapModel>();
  if (name == "ordered_set") return std::make_unique<OrderedSetModel>();
  if (name == "queue") return std::make_unique<QueueModel>();
  return absl::NotFoundError(absl::StrCat("unknown model \"", name,
                                          "\"; known: ",
                                          absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace lincheck
