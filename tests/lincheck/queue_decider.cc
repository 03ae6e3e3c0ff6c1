#include "tests/lincheck/queue_decider.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace lincheck {
namespace {

constexpr int kNone = -1;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// The enqueue and dequeue of one value (operation indices).
struct ValueOps {
  int enq = kNone;
  int deq = kNone;
};

PartitionOutcome Violation(std::string explanation, std::vector<size_t> witnesses) {
  std::sort(witnesses.begin(), witnesses.end());
  PartitionOutcome outcome;
  outcome.verdict = Verdict::kIllegal;
  outcome.explanation = std::move(explanation);
  outcome.witnesses = std::move(witnesses);
  return outcome;
}

class Decider {
 public:
  explicit Decider(const History& ops) : ops_(ops) {}

  std::optional<PartitionOutcome> Run() {
    // Index values; reject histories outside the preconditions.
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Operation& op = ops_[i];
      if (op.op == "enqueue") {
        if (!op.pending() && !op.result.empty() && op.result[0] == 0) {
          return std::nullopt;
        }
        ValueOps& value = Lookup(op.args[0]);
        if (value.enq != kNone) return std::nullopt;
        value.enq = static_cast<int>(i);
        continue;
      }
      if (op.pending()) return std::nullopt;
      if (op.result[0] == 0) {
        if (op.result[1] != 0) {
          return Violation("a dequeue reported empty with a nonzero value", {i});
        }
        empties_.push_back(static_cast<int>(i));
        continue;
      }
      ValueOps& value = Lookup(op.result[1]);
      if (value.deq != kNone) {
        return Violation(absl::StrCat("repeat: value ", op.result[1],
                                      " was dequeued twice"),
                         {static_cast<size_t>(value.deq), i});
      }
      value.deq = static_cast<int>(i);
    }
    if (auto v = CheckFresh()) return v;
    if (auto v = CheckOrder()) return v;
    if (auto v = CheckEmpty()) return v;
    return PartitionOutcome{};
  }

 private:
  // The record of `value`, created on first sight; value_order_ keeps the
  // order of first sight so that reports are deterministic.
  ValueOps& Lookup(int64_t value) {
    auto [it, inserted] = values_.try_emplace(value);
    if (inserted) value_order_.push_back(value);
    return it->second;
  }

  int64_t Response(int i) const { return ops_[i].response_ns; }
  int64_t Invoke(int i) const { return ops_[i].invoke_ns; }

  std::optional<PartitionOutcome> CheckFresh() {
    for (int64_t value : value_order_) {
      const ValueOps& v = values_.at(value);
      if (v.deq == kNone) continue;
      if (v.enq == kNone) {
        return Violation(absl::StrCat("fresh: a dequeue returned ", value,
                                      ", which was never enqueued"),
                         {static_cast<size_t>(v.deq)});
      }
      if (Response(v.deq) < Invoke(v.enq)) {
        return Violation(
            absl::StrCat("fresh: the dequeue of ", value,
                         " returned before the enqueue of ", value, " began"),
            {static_cast<size_t>(v.enq), static_cast<size_t>(v.deq)});
      }
    }
    return std::nullopt;
  }

  // Values that take part in every linearization: all but those whose
  // enqueue is pending and which nobody dequeued.
  std::vector<ValueOps> Effective() const {
    std::vector<ValueOps> effective;
    for (int64_t value : value_order_) {
      const ValueOps& v = values_.at(value);
      if (v.enq == kNone) continue;
      if (ops_[v.enq].pending() && v.deq == kNone) continue;
      effective.push_back(v);
    }
    return effective;
  }

  // order: for each dequeued b, among the enqueues a with enq(a) <h enq(b),
  // the one whose dequeue starts last (never = forever) must start before
  // deq(b) returns.
  std::optional<PartitionOutcome> CheckOrder() {
    std::vector<ValueOps> effective = Effective();
    std::stable_sort(effective.begin(), effective.end(),
              [&](const ValueOps& x, const ValueOps& y) {
                return Response(x.enq) < Response(y.enq);
              });
    // best[k]: among effective[0..k], the one whose dequeue starts last.
    std::vector<int> best(effective.size());
    auto deq_start = [&](const ValueOps& v) {
      return v.deq == kNone ? kForever : Invoke(v.deq);
    };
    for (size_t k = 0; k < effective.size(); ++k) {
      best[k] = (k > 0 && deq_start(effective[best[k - 1]]) >= deq_start(effective[k]))
                    ? best[k - 1]
                    : static_cast<int>(k);
    }
    for (const ValueOps& b : effective) {
      if (b.deq == kNone) continue;
      // Enqueues that returned before enq(b) was invoked form a prefix.
      const auto end = std::partition_point(
          effective.begin(), effective.end(),
          [&](const ValueOps& a) { return Response(a.enq) < Invoke(b.enq); });
      if (end == effective.begin()) continue;
      const ValueOps& a = effective[best[end - effective.begin() - 1]];
      if (deq_start(a) <= Response(b.deq)) continue;
      const int64_t va = ops_[a.enq].args[0];
      const int64_t vb = ops_[b.enq].args[0];
      std::vector<size_t> witnesses = {static_cast<size_t>(a.enq),
                                       static_cast<size_t>(b.enq),
                                       static_cast<size_t>(b.deq)};
      if (a.deq == kNone) {
        return Violation(
            absl::StrCat("order: enqueue(", va, ") returned before enqueue(", vb,
                         ") began, and ", vb, " was dequeued but ", va,
                         " never was"),
            std::move(witnesses));
      }
      witnesses.push_back(a.deq);
      return Violation(
          absl::StrCat("order: enqueue(", va, ") returned before enqueue(", vb,
                       ") began, yet the dequeue of ", vb,
                       " returned before the dequeue of ", va, " began"),
          std::move(witnesses));
    }
    return std::nullopt;
  }

  // empty: merge the open "provably present" intervals into disjoint open
  // components, then test each empty dequeue against the one it starts in.
  std::optional<PartitionOutcome> CheckEmpty() {
    if (empties_.empty()) return std::nullopt;
    struct Interval {
      int64_t begin, end;  // open
    };
    std::vector<Interval> present;
    std::vector<ValueOps> effective = Effective();
    for (const ValueOps& v : effective) {
      const int64_t begin = Response(v.enq);
      const int64_t end = v.deq == kNone ? kForever : Invoke(v.deq);
      if (begin < end) present.push_back({begin, end});
    }
    std::sort(present.begin(), present.end(),
              [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
    std::vector<Interval> components;
    for (const Interval& in : present) {
      // Open intervals that merely touch leave the touching point uncovered.
      if (!components.empty() && in.begin < components.back().end) {
        components.back().end = std::max(components.back().end, in.end);
      } else {
        components.push_back(in);
      }
    }
    for (int z : empties_) {
      // The last component that begins strictly before the dequeue does.
      auto it = std::partition_point(
          components.begin(), components.end(),
          [&](const Interval& c) { return c.begin < Invoke(z); });
      if (it == components.begin()) continue;
      --it;
      if (it->end <= Response(z)) continue;
      // Covered. Name the values whose presence overlaps the dequeue.
      std::vector<size_t> witnesses = {static_cast<size_t>(z)};
      std::string values;
      for (const ValueOps& v : effective) {
        const int64_t begin = Response(v.enq);
        const int64_t end = v.deq == kNone ? kForever : Invoke(v.deq);
        if (begin < end && begin < Response(z) && end > Invoke(z)) {
          witnesses.push_back(v.enq);
          if (v.deq != kNone) witnesses.push_back(v.deq);
          absl::StrAppend(&values, values.empty() ? "" : ", ",
                          ops_[v.enq].args[0]);
        }
      }
      return Violation(
          absl::StrCat("empty: a dequeue returned empty, but throughout it the "
                       "queue provably held a value (of ",
                       values, ")"),
          std::move(witnesses));
    }
    return std::nullopt;
  }

  const History& ops_;
  absl::flat_hash_map<int64_t, ValueOps> values_;
  std::vector<int64_t> value_order_;
  std::vector<int> empties_;
};

}  // namespace

std::optional<PartitionOutcome> DecideUniqueValueQueue(const History& ops) {
  return Decider(ops).Run();
}

}  // namespace lincheck
