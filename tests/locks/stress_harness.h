#ifndef TESTS_LOCKS_STRESS_HARNESS_H_
#define TESTS_LOCKS_STRESS_HARNESS_H_

// Mutual-exclusion stress for any LockClient: threads on several nodes, on
// the native, loopback and remote paths, hammer a few shared locks. Inside
// each critical section the holder does a NON-atomic read-increment-write of
// a per-lock counter in registered memory, over its own path (CPU loads and
// stores when the acquire was native, RDMA READ then RDMA WRITE when it went
// through the NIC), and an occupancy counter (process memory) detects two
// holders at once. At the end every counter must equal the number of
// acquisitions of its lock.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "locks/lock.h"
#include "rdma/cluster.h"

namespace locks::testing {

// The fabric the lock tests run on: the first of RDMADS_FABRICS (default
// soft; the Soft-RoCE guest run sets verbs). Soft-only fault hooks (NIC
// atomic pauses) are skipped on verbs; the checks stay the same.
rdma::FabricKind FabricUnderTest();
bool OnVerbs();
// `cases` when the fabric under test is soft, else none: for cases that
// exercise a soft-NIC-only mode (byte-granular copies). On verbs they would
// only repeat the plain cases, so they are not instantiated there at all.
template <typename Case>
std::vector<Case> OnlyOnSoft(std::vector<Case> cases) {
  if (FabricUnderTest() != rdma::FabricKind::kSoft) cases.clear();
  return cases;
}
// True when built with ThreadSanitizer (tests scale their work down).
bool UnderTsan();
// Scales `n` down under sanitizers (TSan /8), at least 1.
int Scaled(int n);

using ClientFactory =
    std::function<absl::StatusOr<std::unique_ptr<LockClient>>(rdma::Node& node, rdma::Session* session)>;

struct ThreadSpec {
  rdma::NodeId node = 0;
  Path path = Path::kAuto;
};

struct StressConfig {
  std::string name;
  int num_nodes = 3;
  std::vector<rdma::NodeId> lock_nodes = {0, 1};  // one table per node listed
  int locks_per_node = 2;
  LockInit init;
  std::vector<ThreadSpec> threads;
  int iterations_per_thread = 1000;
  // Stop early after this long (the check still uses the counts achieved).
  std::chrono::milliseconds max_duration{20000};
  uint64_t seed = 1;
  // Busy time inside the critical section between the read and the write.
  std::chrono::nanoseconds cs_delay{0};
  // Yield inside the critical section every n-th acquisition (0 = never):
  // lets other threads run while the lock is held.
  int yield_in_cs_every = 4;
  // Access the CPU-side counter with relaxed atomics instead of plain loads
  // and stores (for the mutant, so a broken lock shows up as a wrong count
  // rather than as a TSan report).
  bool atomic_cpu_counter = false;
  // Stall the lock nodes' NIC atomics now and then (soft NIC PauseNextAtomic:
  // the NIC has read the old value and not yet written the new one), widening
  // the window in which a CPU RMW can slip into a NIC RMW, as a slow NIC
  // read-modify-write over PCIe does on real hardware.
  //  * pause_nic_atomics: whichever NIC atomic comes next, over and over;
  //  * pause_remote_acquires_every = n: a NIC-path thread arms the stall right
  //    before every n-th Lock, so it usually hits that acquire's first CAS.
  bool pause_nic_atomics = false;
  int pause_remote_acquires_every = 0;
  std::chrono::microseconds pause_length{300};
  // End the run at the first overlap seen (the mutant test: a broken lock can
  // also lose queue nodes, and the threads stranded by that only time out).
  bool stop_on_violation = false;
  // After a failed Lock/Unlock, log it, replace the thread's client with a new
  // one (the old one is kept alive: a corrupted queue may still point at its
  // descriptors) and go on, instead of ending the thread.
  bool continue_after_error = false;
  // Soft NIC only (ignored on verbs, where rxe already behaves so): every
  // node's NIC copies READ/WRITE payloads a byte at a time, so a CPU load can
  // see a lock word half written by a WRITE (SoftDeviceOptions::
  // byte_granular_copies; tests/verbs/README.md, "rxe torn WRITE").
  bool byte_granular_copies = false;
  // With byte_granular_copies: every node's NIC yields its thread after
  // every copied byte whose offset % 8 == this (0..7), in the middle of each
  // word, widening the window in which a spinning waiter sees a torn word.
  // -1 = never.
  int yield_after_byte = -1;
  // With byte_granular_copies: bytes land last to first (SoftDeviceOptions::
  // byte_copies_descending), an adversarial order that probes waiters
  // relying on the ascending order of x86 memcpy.
  bool byte_copies_descending = false;
  ClientFactory factory;
};

struct StressResult {
  uint64_t acquisitions = 0;      // successful Lock calls
  uint64_t counter_total = 0;     // sum of the per-lock counters at the end
  uint64_t mismatched_locks = 0;  // locks whose counter != their acquisitions
  uint64_t overlaps = 0;          // times a holder found another holder inside
  uint64_t pauses = 0;            // NIC atomics stalled by the pauser
  std::vector<std::string> errors;  // failed Lock/Unlock/RDMA calls
  double seconds = 0;

  bool violated() const { return mismatched_locks > 0 || overlaps > 0; }
  std::string Summary() const;
};

// Runs the stress on a fresh soft-NIC cluster.
StressResult RunStress(const StressConfig& config);

// The ThreadSpecs for `per_node` native threads on each node in `nodes`, plus
// `loopback` threads per lock node that force Path::kLoopback.
std::vector<ThreadSpec> MixedThreads(int num_nodes, int per_node, const std::vector<rdma::NodeId>& lock_nodes,
                                     int loopback);

}  // namespace locks::testing

#endif  // TESTS_LOCKS_STRESS_HARNESS_H_
