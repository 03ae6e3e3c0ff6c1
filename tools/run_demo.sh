#!/usr/bin/env bash
# Quick start, command 1: installs what is missing, builds, and runs the demo
# on the default backend (auto: verbs if an RDMA device exists, else soft).
# Extra arguments go to the demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup_deps.sh
bazel build -c opt //tools/demo:cluster_demo >/dev/null 2>&1 || bazel build -c opt //tools/demo:cluster_demo
exec bazel-bin/tools/demo/cluster_demo "$@"
