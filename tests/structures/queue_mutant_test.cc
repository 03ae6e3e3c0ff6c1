// The queue's mutants (structures/queue/policy.h), each built from the same
// source with one check turned off, must be caught by the recorded stress plus
// lincheck (an illegal history) or by the queue's own checks (an error); the
// real queue must pass the identical runs. Soft NIC only: the runs use its
// byte-copy mode and copy pauses to widen the races.

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/queue_stress.h"

namespace structures::testing {
namespace {

struct PayloadBeforeSeq : queue_internal::ShippedChecks {
  static constexpr bool kSeqBeforePayload = false;
};
struct PublishBeforePayload : queue_internal::ShippedChecks {
  static constexpr bool kPublishAfterPayload = false;
};
struct NoEmptyCheck : queue_internal::ShippedChecks {
  static constexpr bool kCheckEmpty = false;
};

// A small ring (slots are reused all the time), producers and consumers on
// every path, NIC payload copies of node 0's ring parked mid-value.
QueueStressConfig Racy(uint64_t seed) {
  QueueStressConfig c;
  c.seed = seed;
  c.capacity = 4;
  c.byte_granular_copies = true;
  c.pause = std::chrono::microseconds(20);
  // Native workers pause between operations so that they overlap the whole
  // (much slower) NIC run.
  const auto think = std::chrono::microseconds(20);
  c.workers = {{0, Path::kAuto, QueueWorker::kProducer, 1, think},
               {0, Path::kAuto, QueueWorker::kConsumer, 1, think},
               {1, Path::kAuto, QueueWorker::kProducer},
               {2, Path::kAuto, QueueWorker::kConsumer},
               {0, Path::kLoopback, QueueWorker::kBoth}};
  c.ops_per_worker = 300;
  c.duration = std::chrono::milliseconds(3000);
  // A mutant can leave a lock unusable (a successor that never links in):
  // fail fast instead of waiting the default 30 s.
  c.lock_timeout = std::chrono::seconds(2);
  return c;
}

// Whether one run of `Policy` on `c` was caught: an error, a "full" or
// "empty" answer the counts rule out, or a history whose other operations are
// not linearizable (decided against the unbounded model without the "full"
// enqueues, which change nothing; sound, and fast for long histories).
template <typename Policy>
bool Caught(const QueueStressConfig& c, std::string* how) {
  QueueStressResult r = RunQueueStress<Policy>(c);
  std::printf("seed %llu: %zu ops, %llu enqueued, %llu dequeued, %llu full, %llu empty, %llu errors\n",
              static_cast<unsigned long long>(c.seed), r.history.size(), static_cast<unsigned long long>(r.enqueued),
              static_cast<unsigned long long>(r.dequeued), static_cast<unsigned long long>(r.full),
              static_cast<unsigned long long>(r.empty), static_cast<unsigned long long>(r.errors));
  if (r.errors > 0) {
    *how = "error: " + r.first_error;
    return true;
  }
  if (std::string v = BoundedAnswersViolation(r.history, c.capacity); !v.empty()) {
    *how = "bounded answers: " + v;
    return true;
  }
  if (std::string v = BatchOrderViolation(r.history, r.enq_batches, r.deq_batches); !v.empty()) {
    *how = "batch order: " + v;
    return true;
  }
  lincheck::CheckOptions o;
  o.timeout = absl::Seconds(20);
  const lincheck::Verdict v = lincheck::VerdictOf(lincheck::QueueModel(), WithoutFullEnqueues(r.history), o);
  *how = "verdict " + std::string(lincheck::VerdictName(v));
  return v == lincheck::Verdict::kIllegal;
}

// Runs seeds until the mutant is caught (at most `max_seeds`).
template <typename Policy>
void ExpectCaught(int max_seeds) {
  for (int seed = 1; seed <= max_seeds; ++seed) {
    std::string how;
    if (Caught<Policy>(Racy(seed), &how)) {
      std::printf("caught with seed %d: %s\n", seed, how.c_str());
      return;
    }
  }
  ADD_FAILURE() << "mutant not caught in " << max_seeds << " seeds";
}

// A run catches a mutant only when its race happens; one run does so often
// but not always, so each mutant gets up to 40 runs (about 0.2 s each; the
// first catch ends the test).
constexpr int kMaxSeeds = 40;
TEST(QueueMutantTest, PayloadReadBeforeSeqIsCaught) { ExpectCaught<PayloadBeforeSeq>(kMaxSeeds); }
TEST(QueueMutantTest, PublishBeforePayloadIsCaught) { ExpectCaught<PublishBeforePayload>(kMaxSeeds); }
TEST(QueueMutantTest, DequeueWithoutEmptyCheckIsCaught) { ExpectCaught<NoEmptyCheck>(kMaxSeeds); }

// The control: the real queue passes the identical runs.
TEST(QueueMutantTest, RealQueuePassesTheSameRuns) {
  for (int seed = 1; seed <= 3; ++seed) {
    std::string how;
    EXPECT_FALSE(Caught<queue_internal::ShippedChecks>(Racy(seed), &how)) << "seed " << seed << ": " << how;
  }
}

}  // namespace
}  // namespace structures::testing
