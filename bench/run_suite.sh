#!/usr/bin/env bash
# The benchmark suite: every structure on every path, the baselines in the
# same run, one CSV and the plots (bench/suite/README.md).
#
# Usage: bench/run_suite.sh [options]
#   --quick             short runs (about 2 minutes on 2 cores): 1 repetition,
#                       --benchmark_min_time 0.05, 20,000 keys per map. The full
#                       suite: 3 interleaved repetitions (medians reported),
#                       100,000 hash map keys, 200,000 ordered map keys
#                       (about 9 minutes)
#   --fabric=KIND       soft | verbs | auto (default soft). verbs on a machine
#                       without an RDMA device runs the suite inside a Soft-RoCE
#                       qemu guest (tools/rxe_vm/rxe_run) on rxe0
#   --out DIR           where results go (default bench/results/<fabric>)
#   --parts LIST        comma-separated subset of
#                       transport,locks,hash_map,skiplist,queue (default all)
#   --min-time S        per-benchmark minimum time (overrides the default)
#   --keys N            keys loaded into each map (overrides the default)
#   --no-build          use the binaries in --bin-dir as they are
#   --bin-dir DIR       where the binaries are (default bazel-bin)
#   -h, --help          this help
# Writes, in DIR: <part>.json (Google Benchmark JSON; locks.csv for the lock
# table), <part>.log (the part's stderr), results.csv (one tidy row per
# measurement) and the PNG plots. Progress goes to stderr. A part that fails
# is reported and the others still run; the exit code is then 1.
set -uo pipefail

# The tree this script sits in (a checkout, or a Bazel test's runfiles).
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
fabric=soft
out=""
parts="transport,locks,hash_map,skiplist,queue"
min_time=""
keys=""
build=1
bin_dir="$REPO/bazel-bin"

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run_suite.sh: $*" >&2; exit 2; }
# The value of option $1, which must be there ($2, "" when missing) and not
# look like another option: `--out --quick` must not write the default place.
need_arg() { [[ -n "${2:-}" && "${2:-}" != --* ]] || die "$1 needs a value (try --help)"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --fabric=*) fabric="${1#--fabric=}"; [[ -n "$fabric" ]] || die "--fabric= needs a value" ;;
    --fabric) need_arg --fabric "${2:-}"; shift; fabric="$1" ;;
    --out=*) out="${1#--out=}"; [[ -n "$out" ]] || die "--out= needs a value" ;;
    --out) need_arg --out "${2:-}"; shift; out="$1" ;;
    --parts=*) parts="${1#--parts=}"; [[ -n "$parts" ]] || die "--parts= needs a value" ;;
    --parts) need_arg --parts "${2:-}"; shift; parts="$1" ;;
    --min-time=*) min_time="${1#--min-time=}"; [[ -n "$min_time" ]] || die "--min-time= needs a value" ;;
    --min-time) need_arg --min-time "${2:-}"; shift; min_time="$1" ;;
    --keys=*) keys="${1#--keys=}"; [[ -n "$keys" ]] || die "--keys= needs a value" ;;
    --keys) need_arg --keys "${2:-}"; shift; keys="$1" ;;
    --no-build) build=0 ;;
    --bin-dir=*) bin_dir="${1#--bin-dir=}"; [[ -n "$bin_dir" ]] || die "--bin-dir= needs a value" ;;
    --bin-dir) need_arg --bin-dir "${2:-}"; shift; bin_dir="$1" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done

case "$fabric" in soft|verbs|auto) ;; *) die "--fabric must be soft, verbs or auto (got '$fabric')" ;; esac
if [[ -n "$min_time" ]] && ! [[ "$min_time" =~ ^[0-9]*\.?[0-9]+$ ]]; then
  die "--min-time must be a number of seconds (got '$min_time')"
fi
if [[ -n "$keys" ]] && ! [[ "$keys" =~ ^[1-9][0-9]*$ ]]; then
  die "--keys must be a positive whole number (got '$keys')"
fi
all_parts=(transport locks hash_map skiplist queue)
IFS=',' read -r -a want <<<"$parts"
[[ ${#want[@]} -gt 0 ]] || die "--parts is empty"
for p in "${want[@]}"; do
  [[ " ${all_parts[*]} " == *" $p "* ]] || die "unknown part '$p' (parts: ${all_parts[*]})"
done
[[ -n "$out" ]] || out="$REPO/bench/results/$fabric"
mkdir -p "$out" || die "cannot create --out directory '$out'"
out=$(cd "$out" && pwd)

start=$(date +%s)
say() { echo "[suite +$(( $(date +%s) - start ))s] $*" >&2; }

# ---------------------------------------------------------------- build
if [[ $build -eq 1 ]]; then
  say "building with -c opt (bench/..., tools/lock_bench)"
  if ! (cd "$REPO" && bazel build -c opt //bench:all //tools/lock_bench >"$out/build.log" 2>&1); then
    tail -20 "$out/build.log" >&2
    die "the build failed (full log: $out/build.log)"
  fi
fi
for b in bench/transport_latency bench/hash_map_bench bench/skiplist_bench bench/queue_bench tools/lock_bench/lock_bench; do
  [[ -x "$bin_dir/$b" ]] || die "no binary at $bin_dir/$b (build it, or give --bin-dir)"
done

# ----------------------------------------------- real verbs without a device
has_rdma_device() { [[ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]]; }
if [[ "$fabric" == verbs && -z "${RXE_IN_GUEST:-}" ]] && ! has_rdma_device; then
  say "no RDMA device here: running the suite on rxe0 inside a Soft-RoCE guest (tools/rxe_vm/rxe_run)"
  args=(--no-build --bin-dir "$bin_dir" --fabric=verbs --out "$out" --parts "$parts")
  [[ $quick -eq 1 ]] && args+=(--quick)
  [[ -n "$keys" ]] && args+=(--keys "$keys")
  [[ -n "$min_time" ]] && args+=(--min-time "$min_time")
  guest_timeout=$([[ $quick -eq 1 ]] && echo 900 || echo 3000)
  exec "$REPO/tools/rxe_vm/rxe_run" --mem 4096 --timeout "$guest_timeout" --rw "$out" --cwd "$REPO" \
    -- "$REPO/bench/run_suite.sh" "${args[@]}"
fi

# ---------------------------------------------------------------- parts
gb_flags=(--benchmark_out_format=json "--fabric=$fabric")
if [[ $quick -eq 1 ]]; then
  gb_flags+=("--benchmark_min_time=${min_time:-0.05}")
  map_keys=20000
  ordered_keys=20000
  lock_env=(DURATION="${min_time:-0.3}" WARMUP=0.1 REPEAT=1)
else
  gb_flags+=(--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true
             --benchmark_display_aggregates_only=true)
  [[ -n "$min_time" ]] && gb_flags+=("--benchmark_min_time=$min_time")
  map_keys=100000
  # (skiplist_bench's own default, 10^6, adds about 7 minutes here.)
  ordered_keys=200000
  lock_env=(DURATION="${min_time:-2}" WARMUP=0.5 REPEAT=3)
fi
if [[ -n "$keys" ]]; then
  map_keys=$keys
  ordered_keys=$keys
fi

# Rough durations (s) on the 2-core machine, for the time-left estimate.
declare -A est
if [[ $quick -eq 1 ]]; then
  est=([transport]=5 [locks]=15 [hash_map]=25 [skiplist]=40 [queue]=15)
else
  est=([transport]=25 [locks]=100 [hash_map]=125 [skiplist]=240 [queue]=45)
fi

run_part() {
  local part=$1
  case "$part" in
    transport)
      "$bin_dir/bench/transport_latency" "${gb_flags[@]}" --benchmark_out="$out/transport.json" ;;
    locks)
      env "${lock_env[@]}" FABRIC="$fabric" CSV_OUT="$out/locks.csv" LOCK_BENCH="$bin_dir/tools/lock_bench/lock_bench" \
        "$REPO/tools/lock_bench/run_table.sh" ;;
    hash_map)
      # The paths' table only: the load sweep and the growth runs
      # (loadsweep/..., grow/...) are hash_map_bench's own (bench/README.md).
      "$bin_dir/bench/hash_map_bench" "${gb_flags[@]}" --keys="$map_keys" \
        --benchmark_filter='^(native|loopback|remote)/' --benchmark_out="$out/hash_map.json" ;;
    skiplist)
      "$bin_dir/bench/skiplist_bench" "${gb_flags[@]}" --keys="$ordered_keys" --benchmark_out="$out/skiplist.json" ;;
    queue)
      "$bin_dir/bench/queue_bench" "${gb_flags[@]}" --benchmark_out="$out/queue.json" ;;
  esac
}

remaining=0
for p in "${want[@]}"; do remaining=$(( remaining + est[$p] )); done
failed=()
i=0
for p in "${want[@]}"; do
  i=$(( i + 1 ))
  say "part $i/${#want[@]}: $p (about ${est[$p]} s; about $(( (remaining + 59) / 60 )) min left)"
  rm -f "$out/$p.json" "$out/$p.csv"
  t0=$(date +%s)
  run_part "$p" >"$out/$p.txt" 2>"$out/$p.log"
  rc=$?
  if [[ $rc -ne 0 ]]; then
    failed+=("$p")
    say "part $p FAILED (exit $rc); its last lines (full log: $out/$p.log):"
    tail -5 "$out/$p.log" | sed 's/^/    /' >&2
  elif grep -q '"error_occurred": true' "$out/$p.json" 2>/dev/null; then
    failed+=("$p")
    say "part $p: some benchmarks reported errors (see \"error_message\" in $out/$p.json)"
  else
    say "part $p done in $(( $(date +%s) - t0 )) s"
  fi
  remaining=$(( remaining - est[$p] ))
done

# ---------------------------------------------------------------- report
inputs=()
for p in "${want[@]}"; do
  if [[ "$p" == locks ]]; then
    [[ -s "$out/locks.csv" ]] && inputs+=("$out/locks.csv")
  else
    [[ -s "$out/$p.json" ]] && inputs+=("$out/$p.json")
  fi
done
if [[ ${#inputs[@]} -eq 0 ]]; then
  say "no part produced results"
  exit 1
fi
# Debian's python3 has matplotlib (tools/setup_deps.sh); another python3
# first on PATH may not.
python=""
for p in "${PYTHON:-}" /usr/bin/python3 python3; do
  if [[ -n "$p" ]] && command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then
    python=$p
    break
  fi
done
say "report: results.csv and plots from ${#inputs[@]} inputs"
if [[ -z "$python" ]]; then
  failed+=(report)
  say "report FAILED: no python3 with matplotlib (run tools/setup_deps.sh)"
elif ! "$python" "$REPO/bench/suite/report.py" --out "$out" --label "$fabric" "${inputs[@]}" 2>"$out/report.log"; then
  failed+=(report)
  say "report FAILED:"
  tail -5 "$out/report.log" | sed 's/^/    /' >&2
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  say "done with failures: ${failed[*]}; the other parts' results are in $out"
  exit 1
fi
say "done: $out/results.csv and $(ls "$out"/*.png 2>/dev/null | wc -l) plots"
