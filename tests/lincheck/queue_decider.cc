#include "tests/lincheck/queue_decider.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace lincheck {
namespace {

constexpr int kNone = -1;
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
// Most ways the pending dequeues may have taken effect that we try.
constexpr int64_t kMaxPendingChoices = 4096;

// The enqueue and dequeue of one value (operation indices).
struct ValueOps {
  int enq = kNone;
  int deq = kNone;
};

PartitionOutcome Violation(std::string explanation, std::vector<size_t> witnesses) {
  std::sort(witnesses.begin(), witnesses.end());
  witnesses.erase(std::unique(witnesses.begin(), witnesses.end()), witnesses.end());
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
    if (!PreconditionsHold()) return std::nullopt;
    if (auto v = Index()) return v;
    if (pending_.empty()) {
      if (auto v = CheckAll()) return v;
      return PartitionOutcome{};
    }
    if (!ChooseCandidates()) return std::nullopt;
    used_.assign(candidates_.size(), false);
    if (TryPendingChoices(0)) return PartitionOutcome{};
    first_violation_->explanation = absl::StrCat(
        first_violation_->explanation, " (and likewise however the ",
        pending_.size(), " pending dequeue(s) took effect)");
    return std::move(first_violation_);
  }

 private:
  bool PreconditionsHold() const {
    absl::flat_hash_set<int64_t> enqueued;
    for (const Operation& op : ops_) {
      if (op.op != "enqueue") continue;
      if (!op.pending() && !op.result.empty() && op.result[0] == 0) return false;
      if (!enqueued.insert(op.args[0]).second) return false;
    }
    return true;
  }

  // Indexes values by their enqueue and completed dequeue, and collects
  // empty and pending dequeues. Returns violations visible at once.
  std::optional<PartitionOutcome> Index() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Operation& op = ops_[i];
      if (op.op == "enqueue") {
        Lookup(op.args[0]).enq = static_cast<int>(i);
      } else if (op.pending()) {
        pending_.push_back(static_cast<int>(i));
      } else if (op.result[0] == 0) {
        if (op.result[1] != 0) {
          return Violation("a dequeue reported empty with a nonzero value", {i});
        }
        empties_.push_back(static_cast<int>(i));
      } else {
        ValueOps& value = Lookup(op.result[1]);
        if (value.deq != kNone) {
          return Violation(absl::StrCat("repeat: value ", op.result[1],
                                        " was dequeued twice"),
                           {static_cast<size_t>(value.deq), i});
        }
        value.deq = static_cast<int>(i);
      }
    }
    return std::nullopt;
  }

  // The record of `value`, created on first sight; value_order_ keeps the
  // order of first sight so that reports are deterministic.
  ValueOps& Lookup(int64_t value) {
    auto [it, inserted] = values_.try_emplace(value);
    if (inserted) value_order_.push_back(value);
    return it->second;
  }

  int64_t Response(int i) const { return ops_[i].response_ns; }
  int64_t Invoke(int i) const { return ops_[i].invoke_ns; }
  int64_t EnqueuedValue(const ValueOps& v) const { return ops_[v.enq].args[0]; }

  // Values that take part in every linearization: all but those whose
  // enqueue is pending and which nobody dequeued (such an enqueue is deemed
  // never to have taken effect, the most permissive choice).
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

  // --- Pending dequeues. ---------------------------------------------------
  //
  // A pending dequeue either never took effect (or found the queue empty,
  // which changes nothing) or removed one value that no completed dequeue
  // returned; it then acts as a dequeue of that value that never returns.
  // We try every such assignment, which is exact. Values removed are always
  // a prefix of the enqueue order, so a value that more than
  // (completed value dequeues + pending dequeues) values must precede cannot
  // be removed by a pending dequeue; that bounds the candidates.

  bool ChooseCandidates() {
    std::vector<ValueOps> effective = Effective();
    std::vector<int64_t> enq_responses;
    int64_t dequeued = 0;
    for (const ValueOps& v : effective) {
      enq_responses.push_back(Response(v.enq));
      if (v.deq != kNone) ++dequeued;
    }
    std::sort(enq_responses.begin(), enq_responses.end());
    const int64_t reach = dequeued + static_cast<int64_t>(pending_.size());
    for (const ValueOps& v : effective) {
      if (v.deq != kNone) continue;
      const int64_t predecessors =
          std::lower_bound(enq_responses.begin(), enq_responses.end(), Invoke(v.enq)) -
          enq_responses.begin();
      if (predecessors < reach) candidates_.push_back(EnqueuedValue(v));
    }
    std::stable_sort(candidates_.begin(), candidates_.end(), [&](int64_t a, int64_t b) {
      return Response(values_.at(a).enq) < Response(values_.at(b).enq);
    });
    // Injective partial maps from pending dequeues to candidates.
    const int64_t k = static_cast<int64_t>(pending_.size());
    const int64_t c = static_cast<int64_t>(candidates_.size());
    int64_t choices = 0, term = 1;  // term: C(k, j) * c! / (c - j)!
    for (int64_t j = 0; j <= std::min(k, c); ++j) {
      choices += term;
      if (choices > kMaxPendingChoices) return false;
      term = term * (k - j) / (j + 1) * (c - j);
    }
    return true;
  }

  // Assigns pending dequeue `p` onwards; true once some assignment passes.
  bool TryPendingChoices(size_t p) {
    if (p == pending_.size()) {
      std::optional<PartitionOutcome> violation = CheckAll();
      if (!violation) return true;
      if (!first_violation_) first_violation_ = std::move(violation);
      return false;
    }
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (used_[c]) continue;
      used_[c] = true;
      values_.at(candidates_[c]).deq = pending_[p];
      const bool passed = TryPendingChoices(p + 1);
      values_.at(candidates_[c]).deq = kNone;
      used_[c] = false;
      if (passed) return true;
    }
    return TryPendingChoices(p + 1);  // it never took effect
  }

  // --- The four violations. ------------------------------------------------

  std::optional<PartitionOutcome> CheckAll() {
    if (auto v = CheckFresh()) return v;
    if (auto v = CheckOrder()) return v;
    return CheckEmpty();
  }

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

  // order: for each dequeued b, among the enqueues a with enq(a) <h enq(b),
  // take the one whose dequeue starts last (never dequeued counts as last of
  // all); it must be dequeued, and its dequeue must start before deq(b)
  // returns.
  std::optional<PartitionOutcome> CheckOrder() {
    std::vector<ValueOps> effective = Effective();
    std::stable_sort(effective.begin(), effective.end(),
                     [&](const ValueOps& x, const ValueOps& y) {
                       return Response(x.enq) < Response(y.enq);
                     });
    auto deq_start = [&](const ValueOps& v) {
      return v.deq == kNone ? kForever : Invoke(v.deq);
    };
    // latest[k]: among effective[0..k], the one whose dequeue starts last.
    std::vector<int> latest(effective.size());
    for (size_t k = 0; k < effective.size(); ++k) {
      latest[k] = (k > 0 && deq_start(effective[latest[k - 1]]) >= deq_start(effective[k]))
                      ? latest[k - 1]
                      : static_cast<int>(k);
    }
    for (const ValueOps& b : effective) {
      if (b.deq == kNone) continue;
      // Enqueues that returned before enq(b) was invoked form a prefix.
      const auto end = std::partition_point(
          effective.begin(), effective.end(),
          [&](const ValueOps& a) { return Response(a.enq) < Invoke(b.enq); });
      if (end == effective.begin()) continue;
      const ValueOps& a = effective[latest[end - effective.begin() - 1]];
      if (a.deq != kNone && Invoke(a.deq) <= Response(b.deq)) continue;
      const int64_t va = EnqueuedValue(a);
      const int64_t vb = EnqueuedValue(b);
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
    std::vector<ValueOps> effective = Effective();
    auto presence = [&](const ValueOps& v) {
      return Interval{Response(v.enq), v.deq == kNone ? kForever : Invoke(v.deq)};
    };
    std::vector<Interval> present;
    for (const ValueOps& v : effective) {
      const Interval in = presence(v);
      if (in.begin < in.end) present.push_back(in);
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
        const Interval in = presence(v);
        if (in.begin < in.end && in.begin < Response(z) && in.end > Invoke(z)) {
          witnesses.push_back(v.enq);
          if (v.deq != kNone) witnesses.push_back(v.deq);
          absl::StrAppend(&values, values.empty() ? "" : ", ", EnqueuedValue(v));
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
  std::vector<int> pending_;         // pending dequeues
  std::vector<int64_t> candidates_;  // values a pending dequeue may remove
  std::vector<bool> used_;
  std::optional<PartitionOutcome> first_violation_;
};

}  // namespace

std::optional<PartitionOutcome> DecideUniqueValueQueue(const History& ops) {
  return Decider(ops).Run();
}

}  // namespace lincheck
