#ifndef BENCH_CLUSTER_BENCH_RUN_H_
#define BENCH_CLUSTER_BENCH_RUN_H_

// cluster_bench's whole run, as a function: parse the flags, open the
// cluster (one node per process from the job's environment, or every node in
// this process), open the structures by name, load each node's keys, run
// every cell on every process at once, gather the counts on rank 0, print
// and write the rows. bench/cluster_bench_main.cc calls it; so does the
// guest test (bench/cluster_bench_mpi_test.cc), once per test case.
//
//   int code = bench::cluster::Main({"--in-process=3", "--seconds=1", "--json=out.json"});
//
// Contract: returns the exit code (0 done; 1 the cluster, an operation or a
// cost check failed, or a file could not be written: a message on stderr;
// 2 bad flags: a message on stderr). Every process of a job must pass the
// same arguments. After every stage the processes exchange their status
// (the bootstrap's AllGather), so one process's failure ends every
// process's run at the same point with the same code, and no process waits
// on a collective the others skipped; a process that dies is noticed within
// the bootstrap's timeout. Rank 0 alone prints the table (stdout) and the
// progress (stderr); every rank prints its own setup errors.

#include <string>
#include <vector>

namespace bench::cluster {

int Main(const std::vector<std::string>& args);

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_RUN_H_
