#ifndef TESTS_STRUCTURES_MAP_MODELS_H_
#define TESTS_STRUCTURES_MAP_MODELS_H_

// lincheck's map models plus the two operations our maps add:
//
//   insert(k, v)  -> {inserted}   binds k to v only if k is absent
//   contains(k)   -> {found}
//
// put/get/erase (and lower_bound, for the ordered map) are the base model's,
// with its state encoding (flat sorted {k0, v0, k1, v1, ...}) and its
// partitioning (per key, or whole histories once lower_bound appears).

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/lincheck/map_model.h"

namespace structures::testing {

template <typename Base>
class InsertContainsModel : public Base {
 public:
  absl::Status Validate(const lincheck::Operation& op) const override {
    if (op.op == "insert") return this->CheckShape(op, 2, {1});
    if (op.op == "contains") return this->CheckShape(op, 1, {1});
    return Base::Validate(op);
  }
  lincheck::StepResult Step(const lincheck::State& state, const lincheck::Operation& op) const override {
    if (op.op != "insert" && op.op != "contains") return Base::Step(state, op);
    const int64_t key = op.args[0];
    const size_t pair = this->LowerBoundPair(state, key);
    const bool found = this->Has(state, pair, key);
    if (op.op == "contains") return {this->Matches(op, {found ? 1 : 0}), state};
    if (found) return {this->Matches(op, {0}), state};
    lincheck::State next = state;
    const int64_t binding[] = {key, op.args[1]};
    next.insert(next.begin() + 2 * pair, binding, binding + 2);
    return {this->Matches(op, {1}), std::move(next)};
  }
  std::string Describe(const lincheck::Operation& op) const override {
    if (op.op != "insert" && op.op != "contains") return Base::Describe(op);
    std::string call = op.op == "insert" ? absl::StrCat("insert(", op.args[0], ", ", op.args[1], ")")
                                         : absl::StrCat("contains(", op.args[0], ")");
    if (op.pending()) return absl::StrCat(call, " -> pending");
    if (op.op == "insert") return absl::StrCat(call, op.result[0] ? " -> inserted" : " -> was present");
    return absl::StrCat(call, op.result[0] ? " -> found" : " -> absent");
  }
};

// The hash map's: put, get, erase, insert, contains; per key.
class HashMapModel : public InsertContainsModel<lincheck::MapModel> {
 public:
  absl::string_view name() const override { return "hash_map"; }
};

// The ordered map's: the above and lower_bound(k) -> {found, key, value}.
class SkipListModel : public InsertContainsModel<lincheck::OrderedMapModel> {
 public:
  absl::string_view name() const override { return "skiplist"; }
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_MAP_MODELS_H_
