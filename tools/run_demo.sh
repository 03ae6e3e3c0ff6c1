#!/usr/bin/env bash
# Quick start, command 1: installs what is missing, builds, and runs the demo
# on the default backend (auto: verbs if an RDMA device exists, else soft).
# Usage: tools/run_demo.sh [--fabric=soft|verbs|auto] [--reps=N] [DEMO FLAGS]
# The flags go to the demo; bazel-bin/tools/demo/cluster_demo --help lists
# them all, with their defaults.
set -euo pipefail

# Arguments first: --help and malformed arguments must not install or build
# anything. Which flags exist and what values they take is the demo's to say
# (its flags change; a copy of the list here would go stale), so this checks
# only the form: --name, --name=value, or a value right after --name.
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done
args=("$@")
after_flag=0
for arg in "$@"; do
  case "$arg" in
    --[a-zA-Z]*=*) after_flag=0 ;;
    --[a-zA-Z]*) after_flag=1 ;;
    *)
      if [[ $after_flag -eq 0 || "$arg" == -* ]]; then
        echo "run_demo.sh: unexpected argument '$arg' (try --help)" >&2
        exit 2
      fi
      after_flag=0 ;;
  esac
done

cd "$(dirname "$0")/.."
tools/setup_deps.sh
# Progress: the first build on a fresh machine takes minutes.
echo "run_demo.sh: building the demo (bazel build -c opt //tools/demo:cluster_demo) ..." >&2
bazel build -c opt //tools/demo:cluster_demo || exit 1
exec bazel-bin/tools/demo/cluster_demo "${args[@]}"
