// cluster_bench: the cross-process benchmark of rdmads' structures (hash map,
// ordered map, queue), one node per process under mpirun, srun or a peer
// list, or every node in one process (--in-process=N). `cluster_bench --help`
// lists the flags; bench/README.md ("cluster_bench") shows how to run it and
// read its output; bench/cluster_bench_run.h is the run itself.
//
//   bazel build -c opt //bench:cluster_bench
//   mpirun -np 3 bazel-bin/bench/cluster_bench --json=cluster.json
//   bazel-bin/bench/cluster_bench --in-process=3 --seconds=1
//
// Exit codes: 0 done, 1 a failure (the message says which), 2 bad flags.

#include <string>
#include <vector>

#include "bench/cluster_bench_run.h"

int main(int argc, char** argv) {
  return bench::cluster::Main(std::vector<std::string>(argv + 1, argv + argc));
}
