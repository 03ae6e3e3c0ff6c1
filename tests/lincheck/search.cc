#include "tests/lincheck/search.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"

namespace lincheck {
namespace {

constexpr int kNil = -1;
// How many search steps pass between two looks at the clock.
constexpr uint64_t kClockInterval = 256;

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

using Bits = std::vector<uint64_t>;

// The configurations explored so far: (set of linearized operations, state)
// pairs. Their data lives in large chunks, never moved once written, so an
// entry costs its data plus 24 bytes, the cache grows without copying, and it
// is freed in a few large pieces (a search that gave up after millions of
// configurations returns promptly).
class ConfigCache {
 public:
  explicit ConfigCache(size_t words) : words_(words), set_(0, Hasher{}, Equal{words}) {}
  ConfigCache(const ConfigCache&) = delete;
  ConfigCache& operator=(const ConfigCache&) = delete;

  // Adds the configuration; false if it was already present.
  bool Insert(const Bits& linearized, const State& state) {
    const Probe probe{absl::HashOf(absl::MakeConstSpan(linearized),
                                   absl::MakeConstSpan(state)),
                      linearized, absl::MakeConstSpan(state)};
    if (set_.find(probe) != set_.end()) return false;
    uint64_t* data = Allocate(words_ + state.size());
    std::copy(linearized.begin(), linearized.end(), data);
    std::transform(state.begin(), state.end(), data + words_,
                   [](int64_t v) { return static_cast<uint64_t>(v); });
    set_.insert(Entry{probe.hash, data, static_cast<uint32_t>(state.size())});
    return true;
  }

  size_t size() const { return set_.size(); }
  size_t bytes() const { return chunk_bytes_ + set_.capacity() * (sizeof(Entry) + 1); }

 private:
  // Chunks grow geometrically, so small searches stay small.
  static constexpr size_t kMinChunkWords = size_t{1} << 9;   // 4 KiB
  static constexpr size_t kMaxChunkWords = size_t{1} << 20;  // 8 MiB

  struct Entry {
    size_t hash;
    const uint64_t* data;  // the linearized bits, then the state
    uint32_t state_size;
  };
  struct Probe {
    size_t hash;
    const Bits& linearized;
    absl::Span<const int64_t> state;
  };
  struct Hasher {
    using is_transparent = void;
    size_t operator()(const Entry& e) const { return e.hash; }
    size_t operator()(const Probe& p) const { return p.hash; }
  };
  struct Equal {
    using is_transparent = void;
    size_t words;
    bool operator()(const Entry& a, const Entry& b) const {
      return a.hash == b.hash && a.state_size == b.state_size &&
             std::equal(a.data, a.data + words + a.state_size, b.data);
    }
    bool operator()(const Entry& a, const Probe& p) const {
      if (a.hash != p.hash || a.state_size != p.state.size()) return false;
      return std::equal(p.linearized.begin(), p.linearized.end(), a.data) &&
             std::equal(p.state.begin(), p.state.end(), a.data + words,
                        [](int64_t x, uint64_t y) { return static_cast<uint64_t>(x) == y; });
    }
    bool operator()(const Probe& p, const Entry& a) const { return (*this)(a, p); }
  };

  uint64_t* Allocate(size_t n) {
    if (n > chunk_free_) {
      last_chunk_words_ = std::min(kMaxChunkWords, std::max(kMinChunkWords, 2 * last_chunk_words_));
      const size_t words = std::max(n, last_chunk_words_);
      chunks_.push_back(std::make_unique_for_overwrite<uint64_t[]>(words));
      chunk_bytes_ += words * sizeof(uint64_t);
      chunk_next_ = chunks_.back().get();
      chunk_free_ = words;
    }
    uint64_t* data = chunk_next_;
    chunk_next_ += n;
    chunk_free_ -= n;
    return data;
  }

  const size_t words_;
  std::vector<std::unique_ptr<uint64_t[]>> chunks_;
  uint64_t* chunk_next_ = nullptr;
  size_t chunk_free_ = 0;
  size_t chunk_bytes_ = 0;
  size_t last_chunk_words_ = 0;
  absl::flat_hash_set<Entry, Hasher, Equal> set_;
};

// Freeing a large cache takes time too (the kernel reclaims its pages at a
// few GB/s), so a search that runs out of time stops early enough to return
// by its deadline.
absl::Duration TeardownTime(size_t cache_bytes) {
  constexpr size_t kBytesPerMicrosecond = 2000;  // 2 GB/s, conservatively
  return absl::Microseconds(cache_bytes / kBytesPerMicrosecond);
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
  // The deepest stack seen, copied lazily: only when the search is about to
  // backtrack from it, so a search that never backtracks copies nothing.
  std::vector<size_t> longest;
  size_t deepest = 0;
  bool deepest_saved = true;

  const size_t words = (ops.size() + 63) / 64;
  ConfigCache cache(words);
  Bits linearized(words, 0);
  State state = model.Init();

  uint64_t steps = 0;
  int entry = list.first();
  while (entry != kNil) {
    if (++steps % kClockInterval == 0 &&
        absl::Now() + TeardownTime(cache.bytes()) > limits.deadline) {
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
        SetBit(linearized, event.op);
        std::swap(state, step.next);  // `state` now holds the next state
        if (cache.Insert(linearized, state)) {
          if (cache.bytes() > limits.max_cache_bytes) {
            outcome.verdict = Verdict::kUnknown;
            outcome.explanation = absl::StrCat(
                "gave up: the search cache exceeded ", limits.max_cache_bytes,
                " bytes (", cache.size(), " configurations)");
            return outcome;
          }
          stack.push_back({entry, std::move(step.next)});
          list.Lift(entry);
          if (stack.size() > deepest) {
            deepest = stack.size();
            deepest_saved = false;
          }
          entry = list.first();
          continue;
        }
        std::swap(state, step.next);
        ClearBit(linearized, event.op);
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
    if (!deepest_saved) {
      longest.clear();
      for (const Frame& frame : stack) longest.push_back(list[frame.call].op);
      deepest_saved = true;
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
    ClearBit(linearized, list[call].op);
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
