#include "tests/lincheck/history_generator.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

namespace lincheck {
namespace {

using Rng = std::mt19937_64;

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool Chance(Rng& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

// One operation's place in the run.
struct Slot {
  int thread = 0;
  int64_t invoke = 0, response = 0;
  bool pending = false;
  bool takes_effect = true;
};

// Slots in linearization order (see the header comment).
std::vector<Slot> MakeSchedule(const GeneratorOptions& options, Rng& rng) {
  const int threads = std::max(options.threads, 1);
  std::vector<int64_t> busy_until(threads, -1);
  std::vector<int> last_of_thread(threads, -1);
  std::vector<Slot> slots;
  slots.reserve(options.ops);
  std::vector<int> idle;
  int64_t point = 1000;
  for (int i = 0; i < options.ops; ++i) {
    point += Uniform(rng, 1, std::max<int64_t>(options.max_gap_ns, 1));
    idle.clear();
    for (int t = 0; t < threads; ++t) {
      if (busy_until[t] < point) idle.push_back(t);
    }
    if (idle.empty()) {
      point = *std::min_element(busy_until.begin(), busy_until.end()) + 1;
      for (int t = 0; t < threads; ++t) {
        if (busy_until[t] < point) idle.push_back(t);
      }
    }
    Slot slot;
    slot.thread = idle[Uniform(rng, 0, idle.size() - 1)];
    slot.invoke = std::max(busy_until[slot.thread] + 1,
                           point - Uniform(rng, 0, options.max_latency_ns));
    slot.response = point + Uniform(rng, 0, options.max_latency_ns);
    busy_until[slot.thread] = slot.response;
    last_of_thread[slot.thread] = i;
    slots.push_back(slot);
  }
  for (int last : last_of_thread) {
    if (last < 0 || !Chance(rng, options.pending_probability)) continue;
    slots[last].pending = true;
    slots[last].takes_effect = Chance(rng, 0.5);
  }
  return slots;
}

// Runs the schedule: `choose(rng)` picks an operation (name and arguments),
// `apply(op)` performs it on the sequential object and returns its result.
template <typename Choose, typename Apply>
History Run(const GeneratorOptions& options, Choose choose, Apply apply) {
  Rng rng(options.seed);
  History history;
  for (const Slot& slot : MakeSchedule(options, rng)) {
    Operation op = choose(rng);
    op.thread = slot.thread;
    op.invoke_ns = slot.invoke;
    op.response_ns = slot.response;
    if (slot.takes_effect) op.result = apply(op);
    if (slot.pending) {
      op.response_ns = kPendingNs;
      op.result.clear();
    }
    history.push_back(std::move(op));
  }
  return history;
}

Operation Named(const char* name, Values args) {
  Operation op;
  op.op = name;
  op.args = std::move(args);
  return op;
}

// put / get / erase on a std::map, shared by the two map generators.
struct SequentialMap {
  std::map<int64_t, int64_t> map;

  Values Apply(const Operation& op) {
    const int64_t key = op.args[0];
    auto it = map.find(key);
    const bool found = it != map.end();
    const int64_t prev = found ? it->second : 0;
    if (op.op == "put") {
      map[key] = op.args[1];
    } else if (op.op == "erase" && found) {
      map.erase(it);
    } else if (op.op == "lower_bound") {
      auto lb = map.lower_bound(key);
      if (lb == map.end()) return {0, 0, 0};
      return {1, lb->first, lb->second};
    }
    return {found ? 1 : 0, prev};
  }
};

Operation ChooseMapOp(const GeneratorOptions& options, Rng& rng, bool ordered) {
  const int64_t key = Uniform(rng, 0, std::max(options.keys, 1) - 1);
  const int64_t roll = Uniform(rng, 0, 99);
  if (ordered && roll < 15) return Named("lower_bound", {key});
  if (roll < 45) return Named("get", {key});
  if (roll < 80) return Named("put", {key, Uniform(rng, 1, options.values)});
  return Named("erase", {key});
}

}  // namespace

History GenerateRegisterHistory(const GeneratorOptions& options) {
  int64_t value = 0;
  const int64_t top = std::max(2, std::min(options.values, 5));
  return Run(
      options,
      [&](Rng& rng) {
        const int64_t roll = Uniform(rng, 0, 2);
        if (roll == 0) return Named("read", {});
        if (roll == 1) return Named("write", {Uniform(rng, 1, top)});
        return Named("cas", {Uniform(rng, 0, top), Uniform(rng, 1, top)});
      },
      [&](const Operation& op) -> Values {
        if (op.op == "read") return {value};
        if (op.op == "write") {
          value = op.args[0];
          return {};
        }
        const bool swapped = value == op.args[0];
        if (swapped) value = op.args[1];
        return {swapped ? 1 : 0};
      });
}

History GenerateMapHistory(const GeneratorOptions& options) {
  SequentialMap map;
  return Run(
      options, [&](Rng& rng) { return ChooseMapOp(options, rng, false); },
      [&](const Operation& op) { return map.Apply(op); });
}

History GenerateOrderedMapHistory(const GeneratorOptions& options) {
  SequentialMap map;
  return Run(
      options, [&](Rng& rng) { return ChooseMapOp(options, rng, true); },
      [&](const Operation& op) { return map.Apply(op); });
}

History GenerateOrderedSetHistory(const GeneratorOptions& options,
                                  bool with_lower_bound) {
  std::set<int64_t> set;
  return Run(
      options,
      [&](Rng& rng) {
        const int64_t key = Uniform(rng, 0, std::max(options.keys, 1) - 1);
        const int64_t roll = Uniform(rng, 0, 99);
        if (with_lower_bound && roll < 20) return Named("lower_bound", {key});
        if (roll < 50) return Named("contains", {key});
        if (roll < 80) return Named("insert", {key});
        return Named("erase", {key});
      },
      [&](const Operation& op) -> Values {
        const int64_t key = op.args[0];
        if (op.op == "lower_bound") {
          auto it = set.lower_bound(key);
          if (it == set.end()) return {0, 0};
          return {1, *it};
        }
        if (op.op == "contains") return {set.count(key) ? 1 : 0};
        if (op.op == "insert") return {set.insert(key).second ? 1 : 0};
        return {set.erase(key) ? 1 : 0};
      });
}

History GenerateQueueHistory(const GeneratorOptions& options) {
  std::deque<int64_t> queue;
  int64_t next_value = 1;
  return Run(
      options,
      [&](Rng& rng) {
        if (Uniform(rng, 0, 1) == 0) return Named("enqueue", {next_value++});
        return Named("dequeue", {});
      },
      [&](const Operation& op) -> Values {
        if (op.op == "enqueue") {
          queue.push_back(op.args[0]);
          return {};
        }
        if (queue.empty()) return {0, 0};
        const int64_t front = queue.front();
        queue.pop_front();
        return {1, front};
      });
}

int CorruptOneResult(History& history, uint64_t seed) {
  // Another operation on the same key overlaps `i` in time.
  auto contended = [&](size_t i) {
    for (size_t j = 0; j < history.size(); ++j) {
      if (j == i || history[j].args.empty() ||
          history[j].args[0] != history[i].args[0]) {
        continue;
      }
      if (!HappensBefore(history[j], history[i]) &&
          !HappensBefore(history[i], history[j])) {
        return true;
      }
    }
    return false;
  };
  std::vector<size_t> candidates(history.size());
  for (size_t i = 0; i < history.size(); ++i) candidates[i] = i;
  Rng rng(seed);
  std::shuffle(candidates.begin(), candidates.end(), rng);
  for (size_t i : candidates) {
    Operation& op = history[i];
    if (op.pending()) continue;
    const absl::string_view name = op.op;
    if (name == "read") {
      op.result = {kNeverWritten};
    } else if (name == "dequeue" ||
               ((name == "get" || name == "put" || name == "erase") &&
                op.result.size() == 2)) {  // map operations
      op.result = {1, kNeverWritten};
    } else if (name == "lower_bound") {
      op.result[0] = 1;
      op.result[1] = op.args[0] - 1;  // below the argument: impossible
    } else if ((name == "insert" || name == "erase" || name == "contains") &&
               op.result.size() == 1 && !contended(i)) {
      op.result[0] = 1 - op.result[0];
    } else {
      continue;
    }
    return static_cast<int>(i);
  }
  return -1;
}

int CorruptWithStaleValue(History& history, uint64_t seed) {
  // Which register or key an operation touches: -1 for the register (no key
  // argument), the key for map operations.
  // (Generated keys are never negative.)
  auto target = [](const Operation& op) -> int64_t {
    if (op.op == "read" || op.op == "write" || op.op == "cas") return -1;
    return op.args.empty() ? -2 : op.args[0];
  };
  // The value `op` may store, if it may store one. A cas counts whatever its
  // result (a pending one may still succeed), which only makes fewer values
  // qualify as stale.
  auto may_write = [](const Operation& op) -> std::optional<int64_t> {
    if (op.op == "write") return op.args[0];
    if (op.op == "cas") return op.args[1];
    if (op.op == "put" && op.args.size() == 2) return op.args[1];
    return std::nullopt;
  };
  // What `op` surely leaves its register or key holding once it returns:
  // `any_but` = x means anything but x (a completed write(x), a successful
  // cas(_, x), put(k, x)); an erase leaves the key absent, which is no value
  // at all. An operation with neither (a read, a failed cas, a pending one)
  // overwrites nothing for sure.
  struct Overwrite {
    int64_t any_but = 0;
    bool erases = false;
  };
  auto overwrite = [](const Operation& op) -> std::optional<Overwrite> {
    if (op.pending()) return std::nullopt;
    if (op.op == "write") return Overwrite{op.args[0]};
    if (op.op == "cas" && op.result == Values{1}) return Overwrite{op.args[1]};
    if (op.op == "put" && op.args.size() == 2) return Overwrite{op.args[1]};
    if (op.op == "erase" && op.result.size() == 2) return Overwrite{0, true};  // map erase
    return std::nullopt;
  };
  // Per register or key: each value its operations may write, in the order of
  // its first writer in `history`, with the latest response among all its
  // writers (kPendingNs if one is pending). "Every operation that may write v
  // precedes W" is then last_response < W's invocation. (That keeps the
  // choice below, the first qualifying read, W and v, cheap: testing every
  // writer against every writer of v instead would be
  // O(reads x ops x writers^2), about a minute under TSan for
  // randomized_test's 300-operation registers.)
  struct Written {
    int64_t value;
    int64_t last_response;
  };
  std::map<int64_t, std::vector<Written>> written;
  // Per register or key: the operations that surely overwrite it, in
  // `history` order.
  std::map<int64_t, std::vector<std::pair<size_t, Overwrite>>> overwriters;
  std::vector<size_t> reads;
  for (size_t i = 0; i < history.size(); ++i) {
    const Operation& op = history[i];
    const int64_t key = target(op);
    if (std::optional<int64_t> v = may_write(op)) {
      std::vector<Written>& values = written[key];
      auto it = std::find_if(values.begin(), values.end(),
                             [&](const Written& w) { return w.value == *v; });
      if (it == values.end()) {
        values.push_back({*v, op.response_ns});
      } else {
        it->last_response = std::max(it->last_response, op.response_ns);
      }
    }
    if (std::optional<Overwrite> o = overwrite(op)) overwriters[key].push_back({i, *o});
    if (op.pending()) continue;
    if ((op.op == "read" && op.result.size() == 1) ||
        (op.op == "get" && op.result.size() == 2)) {
      reads.push_back(i);
    }
  }
  Rng rng(seed);
  std::shuffle(reads.begin(), reads.end(), rng);
  for (size_t r : reads) {
    Operation& read = history[r];
    const int64_t key = target(read);
    const int64_t current = read.op == "read" ? read.result[0] : read.result[1];
    const std::vector<Written>& values = written[key];
    for (const auto& [j, o] : overwriters[key]) {  // j: the overwriting W
      const Operation& w = history[j];
      if (!HappensBefore(w, read)) continue;
      for (const Written& candidate : values) {
        const int64_t v = candidate.value;
        if (v == current || (key == -1 && v == 0)) continue;
        if (!o.erases && o.any_but == v) continue;  // W may leave v there
        // Every operation that may write v must precede W.
        if (candidate.last_response >= w.invoke_ns) continue;
        read.result = read.op == "read" ? Values{v} : Values{1, v};
        return static_cast<int>(r);
      }
    }
  }
  return -1;
}

}  // namespace lincheck
