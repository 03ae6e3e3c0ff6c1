#include "tests/lincheck/search.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace lincheck {
namespace {

constexpr int kNil = -1;
// How many search steps pass between two looks at the clock.
constexpr uint64_t kClockInterval = 1024;

// One call or return event in the time-ordered list.
struct Event {
  int op = 0;         // index into the partition's operations
  bool is_call = false;
  int match = kNil;   // the call's return, or the return's call
  int prev = kNil;
  int next = kNil;
};

// The time-ordered event list, with O(1) removal and LIFO reinsertion
// (dancing links). Event 0 is a sentinel head.
class EventList {
 public:
  explicit EventList(const History& ops) {
    struct Key {
      int64_t time;
      int kind;  // 0 call, 1 return: calls first on equal times
      int op;
    };
    std::vector<Key> keys;
    keys.reserve(2 * ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const int op = static_cast<int>(i);
      keys.push_back({ops[i].invoke_ns, 0, op});
      keys.push_back({ops[i].response_ns, 1, op});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.time, a.kind, a.op) < std::tie(b.time, b.kind, b.op);
    });
    events_.resize(keys.size() + 1);
    std::vector<int> call_of(ops.size(), kNil);
    for (size_t i = 0; i < keys.size(); ++i) {
      const int id = static_cast<int>(i) + 1;
      Event& e = events_[id];
      e.op = keys[i].op;
      e.is_call = keys[i].kind == 0;
      e.prev = id - 1;
      e.next = (i + 1 < keys.size()) ? id + 1 : kNil;
      if (e.is_call) {
        call_of[e.op] = id;
      } else {
        e.match = call_of[e.op];
        events_[e.match].match = id;
      }
    }
    events_[0].next = keys.empty() ? kNil : 1;
  }

  const Event& operator[](int id) const { return events_[id]; }
  int first() const { return events_[0].next; }

  // Removes a call event and its return from the list.
  void Lift(int call) {
    Unlink(call);
    Unlink(events_[call].match);
  }
  // Undoes the most recent Lift still in effect, which must be Lift(call).
  void Unlift(int call) {
    Relink(events_[call].match);
    Relink(call);
  }

 private:
  void Unlink(int id) {
    Event& e = events_[id];
    events_[e.prev].next = e.next;
    if (e.next != kNil) events_[e.next].prev = e.prev;
  }
  void Relink(int id) {
    Event& e = events_[id];
    events_[e.prev].next = id;
    if (e.next != kNil) events_[e.next].prev = id;
  }

  std::vector<Event> events_;
};

using Bits = absl::InlinedVector<uint64_t, 4>;

// A node of the search space: which operations are linearized, and the state
// they lead to.
struct CacheKey {
  Bits linearized;
  State state;

  friend bool operator==(const CacheKey&, const CacheKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const CacheKey& key) {
    return H::combine(std::move(h), key.linearized, key.state);
  }
};

size_t ApproximateBytes(const CacheKey& key) {
  size_t bytes = sizeof(CacheKey) + 8;  // slot plus table overhead
  if (key.linearized.size() > 4) bytes += 8 * key.linearized.size();
  if (key.state.size() > 4) bytes += 8 * key.state.size();
  return bytes;
}

void SetBit(Bits& bits, int i) { bits[i / 64] |= uint64_t{1} << (i % 64); }
void ClearBit(Bits& bits, int i) { bits[i / 64] &= ~(uint64_t{1} << (i % 64)); }

}  // namespace

PartitionOutcome SearchLinearization(const Model& model, const History& ops,
                                     const SearchLimits& limits) {
  PartitionOutcome outcome;
  EventList list(ops);

  struct Frame {
    int call;     // the call event linearized at this depth
    State state;  // the state before it
  };
  std::vector<Frame> stack;
  stack.reserve(ops.size());
  std::vector<size_t> longest;

  absl::flat_hash_set<CacheKey> cache;
  size_t cache_bytes = 0;
  CacheKey probe{Bits((ops.size() + 63) / 64, 0), model.Init()};
  State& state = probe.state;

  uint64_t steps = 0;
  int entry = list.first();
  while (entry != kNil) {
    if (++steps % kClockInterval == 0 && absl::Now() > limits.deadline) {
      outcome.verdict = Verdict::kUnknown;
      outcome.explanation = absl::StrCat(
          "timed out after ", steps, " search steps and ", cache.size(),
          " cached configurations");
      return outcome;
    }
    const Event& event = list[entry];
    if (event.is_call) {
      const Operation& op = ops[event.op];
      StepResult step = model.Step(state, op);
      if (step.ok || op.pending()) {
        SetBit(probe.linearized, event.op);
        std::swap(state, step.next);  // `state` now holds the next state
        if (cache.insert(probe).second) {
          cache_bytes += ApproximateBytes(probe);
          if (cache_bytes > limits.max_cache_bytes) {
            outcome.verdict = Verdict::kUnknown;
            outcome.explanation = absl::StrCat(
                "gave up: the search cache exceeded ", limits.max_cache_bytes,
                " bytes (", cache.size(), " configurations)");
            return outcome;
          }
          stack.push_back({entry, std::move(step.next)});
          list.Lift(entry);
          if (stack.size() > longest.size()) {
            longest.clear();
            for (const Frame& frame : stack) longest.push_back(list[frame.call].op);
          }
          entry = list.first();
          continue;
        }
        std::swap(state, step.next);
        ClearBit(probe.linearized, event.op);
      }
      entry = event.next;
      continue;
    }
    // A return: its operation must be linearized before anything later.
    if (ops[event.op].pending()) {
      // Only pending returns remain, so every completed operation is
      // linearized; the pending ones left over never took effect.
      break;
    }
    if (stack.empty()) {
      outcome.verdict = Verdict::kIllegal;
      outcome.longest_linearization = std::move(longest);
      return outcome;
    }
    Frame& top = stack.back();
    const int call = top.call;
    state = std::move(top.state);
    stack.pop_back();
    ClearBit(probe.linearized, list[call].op);
    list.Unlift(call);
    entry = list[call].next;
  }
  // The stack is a complete linearization; report it as the witness.
  outcome.verdict = Verdict::kOk;
  for (const Frame& frame : stack) {
    outcome.longest_linearization.push_back(list[frame.call].op);
  }
  return outcome;
}

}  // namespace lincheck
