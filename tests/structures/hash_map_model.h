#ifndef TESTS_STRUCTURES_HASH_MAP_MODEL_H_
#define TESTS_STRUCTURES_HASH_MAP_MODEL_H_

// lincheck's MapModel plus the hash map's two extra operations:
//
//   insert(k, v)  -> {inserted}   binds k to v only if k is absent
//   contains(k)   -> {found}
//
// put/get/erase are MapModel's ({found, prev} / {found, value}). Same state
// encoding (flat sorted {k0, v0, k1, v1, ...}) and per-key partitioning.

#include <string>

#include "tests/lincheck/map_model.h"

namespace structures::testing {

class HashMapModel : public lincheck::MapModel {
 public:
  absl::string_view name() const override { return "hash_map"; }
  absl::Status Validate(const lincheck::Operation& op) const override;
  lincheck::StepResult Step(const lincheck::State& state, const lincheck::Operation& op) const override;
  std::string Describe(const lincheck::Operation& op) const override;
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_HASH_MAP_MODEL_H_
