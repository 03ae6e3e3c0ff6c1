#!/bin/bash
# Runs the lock-table matrix of bench/README.md ("lock_bench"): every lock at p-local 0, 50,
# 90 and 100 (local-mcs only at 100: it is native-only), and prints one CSV
# row per run plus a Markdown table. Extra arguments go to every run (options
# not fixed below), e.g.
#   DURATION=10 tools/lock_bench/run_table.sh --nic-latency-ns 2000
# Env: DURATION (measured s, default 5), WARMUP (default 1), THREADS (per node,
# default 2), REPEAT (interleaved rounds; each row is the median run, default
# 3), LOCK_BENCH (binary; default bazel-bin's), FABRIC (soft|verbs|auto,
# default soft), CSV_OUT (also keep every run's CSV row there).
# Build first: bazel build -c opt //tools/lock_bench
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN="${LOCK_BENCH:-$(dirname "$0")/../../bazel-bin/tools/lock_bench/lock_bench}"
if [[ ! -x "$BIN" ]]; then
  echo "run_table.sh: no lock_bench binary at $BIN; run: bazel build -c opt //tools/lock_bench" >&2
  exit 2
fi
COMMON=(--fabric "${FABRIC:-soft}" --nodes 2 --threads-per-node "${THREADS:-2}" --keys 1024 --cs-ns 0
        --warmup "${WARMUP:-1}" --duration "${DURATION:-5}" --seed 1 -q)
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
keep_csv() { [[ -n "${CSV_OUT:-}" ]] && cp "$csv" "$CSV_OUT"; return 0; }
header=""
# Rounds are interleaved (every config once per round) so that background
# noise spreads over all configs; each config's row is its median-throughput run.
for round in $(seq 1 "${REPEAT:-3}"); do
  for lock in alock rdma-spin rdma-mcs local-mcs; do
    for p in 0 50 90 100; do
      [ "$lock" = local-mcs ] && [ "$p" != 100 ] && continue
      out=$("$BIN" --lock "$lock" --p-local "$p" "${COMMON[@]}" --output csv "$@")
      [ -z "$header" ] && header=$(head -1 <<<"$out") && echo "$header" >"$csv"
      echo "round $round: $(tail -1 <<<"$out")" >&2
      tail -1 <<<"$out" >>"$csv"
      keep_csv
    done
  done
done
echo
echo "Median of ${REPEAT:-3} runs per row (by throughput), ${DURATION:-5} s each."
echo
echo "| lock | p-local | Macq/s | p50 ns | p99 ns | p99.9 ns | NIC ops/acq | doorbells/acq | RTs/acq | NIC ops/remote acq | local share % | max local run | max remote run |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
tail -n +2 "$csv" | sort -t, -k1,1 -k6,6n -k14,14g | awk -F, -v n="${REPEAT:-3}" '
  { key = $1 "," $6; rows[key, ++count[key]] = $0; if (!(key in seen)) { seen[key] = 1; order[++k] = key } }
  END {
    for (i = 1; i <= k; i++) {
      key = order[i]; split(rows[key, int((count[key] + 1) / 2)], f, ",")
      printf "| %s | %s | %.3f | %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.1f | %s | %s |\n", f[1], f[6], f[14]/1e6, f[15], f[16], f[17], f[18], f[19], f[20], f[23], f[25], f[26], f[27]
    }
  }'
