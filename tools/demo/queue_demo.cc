#include "tools/demo/queue_demo.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "structures/queue/queue.h"
#include "util/status_macros.h"

namespace demo {
namespace {

struct Message {  // 24 bytes: a typical small work item
  uint64_t id;
  uint64_t sender;
  uint64_t payload;
  bool operator==(const Message&) const = default;
};
using Queue = structures::Queue<Message>;
using Client = structures::QueueClient<Message>;

}  // namespace

absl::Status RunQueueDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows) {
  if (cluster.num_nodes() < 2) return absl::InvalidArgumentError("the queue demo needs at least 2 nodes");
  structures::QueueOptions options;
  options.capacity = static_cast<uint64_t>(reps) + 16;  // the measured enqueues all fit
  ASSIGN_OR_RETURN(Queue queue, Queue::Create(cluster, options));

  // Cross-path visibility: lane i enqueues two messages, lane i+1 dequeues
  // them in order and finds the queue empty after.
  for (size_t i = 0; i < std::size(kLanes); ++i) {
    const Lane& producer = kLanes[i];
    const Lane& consumer = kLanes[(i + 1) % std::size(kLanes)];
    const Message a{2 * i, producer.node, 0xfeed}, b{2 * i + 1, producer.node, 0xbeef};
    RETURN_IF_ERROR(OnThread(cluster, queue, producer.node, [&](Client& c) -> absl::Status {
      for (const Message& m : {a, b}) {
        ASSIGN_OR_RETURN(bool in, c.Enqueue(0, m, producer.path));
        RETURN_IF_ERROR(Check(in, absl::StrCat("queue: ", producer.name, " enqueue found the queue full")));
      }
      return absl::OkStatus();
    }));
    RETURN_IF_ERROR(OnThread(cluster, queue, consumer.node, [&](Client& c) -> absl::Status {
      for (const Message& m : {a, b}) {
        ASSIGN_OR_RETURN(std::optional<Message> got, c.Dequeue(0, consumer.path));
        RETURN_IF_ERROR(Check(got == m, absl::StrCat("queue: ", consumer.name, " dequeue missed ", producer.name,
                                                     "'s message ", m.id, " (FIFO)")));
      }
      ASSIGN_OR_RETURN(std::optional<Message> none, c.Dequeue(0, consumer.path));
      return Check(!none.has_value(), absl::StrCat("queue: ", consumer.name, " dequeue of an empty queue"));
    }));
  }

  // Costs per path: `reps` enqueues, then the same number of dequeues. A
  // NIC lane's first operation on a side the native lane used waits for the
  // native lease's hand-over (docs/design.md §9.4.1): one unmeasured enqueue
  // and dequeue first, so the rows are the uncontended costs.
  for (const Lane& lane : kLanes) {
    RETURN_IF_ERROR(OnThread(cluster, queue, lane.node, [&](Client& c) -> absl::Status {
      ASSIGN_OR_RETURN(bool warm_in, c.Enqueue(0, Message{~uint64_t{0}, lane.node, 0}, lane.path));
      ASSIGN_OR_RETURN(std::optional<Message> warm_out, c.Dequeue(0, lane.path));
      RETURN_IF_ERROR(Check(warm_in && warm_out.has_value() && warm_out->id == ~uint64_t{0},
                            absl::StrCat("queue: ", lane.name, " warm-up enqueue and dequeue")));
      RETURN_IF_ERROR(Measure(lane.name, "enqueue", reps, rows, [&](int i) -> absl::Status {
        ASSIGN_OR_RETURN(bool in, c.Enqueue(0, Message{static_cast<uint64_t>(i), lane.node, 0}, lane.path));
        return Check(in, absl::StrCat("queue: ", lane.name, " enqueue ", i, " found the queue full"));
      }));
      return Measure(lane.name, "dequeue", reps, rows, [&](int i) -> absl::Status {
        ASSIGN_OR_RETURN(std::optional<Message> got, c.Dequeue(0, lane.path));
        return Check(got.has_value() && got->id == static_cast<uint64_t>(i),
                     absl::StrCat("queue: ", lane.name, " dequeue ", i, " got the wrong message"));
      });
    }));
  }
  return absl::OkStatus();
}

}  // namespace demo
