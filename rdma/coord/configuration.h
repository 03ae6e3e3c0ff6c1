#ifndef RDMA_COORD_CONFIGURATION_H_
#define RDMA_COORD_CONFIGURATION_H_

// Configuration: who is in the job at one epoch, as the configuration manager
// wrote it to the coordinator (docs/design.md §5, "Membership").
//
//   Configuration c{.epoch = 7, .members = {{0, inc0, card0, 1}, {2, inc2, card2, 5}}};
//   std::string bytes = EncodeConfiguration(c);
//   absl::StatusOr<Configuration> back = DecodeConfiguration(bytes);
//   back->Has(2, inc2);  // true: rank 2's process of incarnation inc2 is in
//
// Invariants: members are sorted by rank, at most one per rank; epochs only
// grow, by one per configuration written. A process is in the job exactly
// while its (rank, incarnation) is a member of the newest epoch it applied.
// The encoding starts with magic 'RDCF' and a version; integers little-endian.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdma::coord {

struct Member {
  uint32_t rank = 0;
  uint64_t incarnation = 0;
  std::string card;  // what the process registered (its connector's card)
  uint64_t since = 0;  // the epoch that admitted this process
  bool operator==(const Member& o) const {
    return rank == o.rank && incarnation == o.incarnation && card == o.card && since == o.since;
  }
};

struct Configuration {
  uint64_t epoch = 0;
  std::vector<Member> members;  // sorted by rank, one per rank
  // The epoch that started this run of the job (its first configuration);
  // a member whose `since` is later rejoined a running job.
  uint64_t start = 0;

  const Member* Find(uint32_t rank) const;
  bool Has(uint32_t rank, uint64_t incarnation) const;
  // "epoch 7: 0/1f3a.., 2/99c0.."
  std::string ToString() const;
};

std::string EncodeConfiguration(const Configuration& c);
// InvalidArgument for bytes that are not a configuration of this version, or
// whose members are unsorted or repeat a rank.
absl::StatusOr<Configuration> DecodeConfiguration(absl::string_view bytes);

}  // namespace rdma::coord

#endif  // RDMA_COORD_CONFIGURATION_H_
