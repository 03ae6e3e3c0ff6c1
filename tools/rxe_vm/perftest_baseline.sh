#!/bin/bash
# perftest_baseline.sh: perftest latency baseline on rxe0, run INSIDE an
# rxe_run guest, e.g.
#   tools/rxe_vm/rxe_run -- tools/rxe_vm/perftest_baseline.sh
#   tools/rxe_vm/rxe_run --two-guests -- tools/rxe_vm/perftest_baseline.sh --pair
#
# Runs ib_read_lat, ib_write_lat and ib_atomic_lat (FETCH_AND_ADD and
# CMP_AND_SWAP) with 8-byte messages and prints one machine-readable line per
# test on stdout:
#   perftest <test> mode=<loopback|pair> bytes=8 iters=N min_us=.. median_us=.. avg_us=.. p99_us=.. p999_us=.. max_us=..
# median_us is perftest's t_typical (the median of the sorted samples); p99_us
# and p999_us are its "99% / 99.9% percentile" columns. Latencies are as
# perftest reports them: write = half of a ping-pong round trip; read and
# atomics = full round trip of one operation.
#
# Modes:
#   (default) loopback: server and client both in this guest, client connects
#             to this guest's own IP (RXE_SELF_IP) over rxe0.
#   --pair    two guests (rxe_run --two-guests): node 0 runs the servers,
#             node 1 the clients against RXE_PEER_IP; only node 1 prints
#             results. Node 0 exits 0 once all servers are done.
set -u -o pipefail

ITERS=1000 SIZE=8 DEV=${RXE_DEVICE:-rxe0} GID=${RXE_GID_INDEX:-1} MODE=loopback
TESTS="read write atomic_faa atomic_cas" VERBOSE=0 BASE_PORT=18515
usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options: -n ITERS (default $ITERS)  -s BYTES (default $SIZE)  -d DEV (default $DEV)
         -x GID_INDEX (default $GID)  -t "TESTS" (default "$TESTS")
         --pair  -v (print raw perftest output to stderr)  -h
EOF
}
while [ $# -gt 0 ]; do
  case $1 in
    -n) ITERS=$2; shift ;;
    -s) SIZE=$2; shift ;;
    -d) DEV=$2; shift ;;
    -x) GID=$2; shift ;;
    -t) TESTS=$2; shift ;;
    --pair) MODE=pair ;;
    -v) VERBOSE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "perftest_baseline: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

[ -d "/sys/class/infiniband/$DEV" ] || {
  echo "perftest_baseline: no RDMA device $DEV (run me inside tools/rxe_vm/rxe_run)" >&2; exit 2; }
SELF_IP=${RXE_SELF_IP:-$(ip -4 -o addr show dev eth0 | awk '{sub("/.*","",$4); print $4; exit}')}
PEER_IP=${RXE_PEER_IP:-$SELF_IP}
NODE=${RXE_NODE_ID:-0}
if [ $MODE = pair ] && [ "${RXE_NUM_NODES:-1}" != 2 ]; then
  echo "perftest_baseline: --pair needs rxe_run --two-guests" >&2; exit 2
fi
TMP=$(mktemp -d /tmp/perftest_baseline.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

cmd_for() {  # test name -> perftest command line (without host)
  local common=(-d "$DEV" -x "$GID" -s "$SIZE" -n "$ITERS" -F)
  case $1 in
    read) echo ib_read_lat "${common[@]}" ;;
    write) echo ib_write_lat "${common[@]}" ;;
    send) echo ib_send_lat "${common[@]}" ;;
    atomic_faa) echo ib_atomic_lat -d "$DEV" -x "$GID" -n "$ITERS" -F -A FETCH_AND_ADD ;;
    atomic_cas) echo ib_atomic_lat -d "$DEV" -x "$GID" -n "$ITERS" -F -A CMP_AND_SWAP ;;
    *) return 1 ;;
  esac
}

# Client with retries: the server may not be listening yet.
run_client() {  # name port host
  local name=$1 port=$2 host=$3 try
  for _ in $(seq 60); do
    # shellcheck disable=SC2046
    timeout 300 $(cmd_for "$name") -p "$port" "$host" >"$TMP/$name.client" 2>&1 && return 0
    grep -q "t_typical" "$TMP/$name.client" && return 0
    if grep -qiE "couldn't connect|connection refused|Unable to open file descriptor for socket connection" \
         "$TMP/$name.client"; then
      sleep 0.5; continue
    fi
    return 1
  done
  return 1
}

report() {  # name file
  awk -v name="$1" -v mode="$MODE" '
    /t_typical/ { hdr = 1; next }
    hdr && NF >= 9 && $1 ~ /^[0-9]+$/ {
      printf "perftest %s mode=%s bytes=%s iters=%s min_us=%s median_us=%s avg_us=%s p99_us=%s p999_us=%s max_us=%s\n",
        name, mode, $1, $2, $3, $5, $6, $8, $9, $4
      found = 1; exit
    }
    END { exit !found }' "$2"
}

fail=0 port=$BASE_PORT
for t in $TESTS; do
  cmd_for "$t" >/dev/null || { echo "perftest_baseline: unknown test $t" >&2; exit 2; }
  port=$((port + 1))
  if [ $MODE = loopback ] || [ "$NODE" = 0 ]; then
    # shellcheck disable=SC2046
    timeout 300 $(cmd_for "$t") -p "$port" >"$TMP/$t.server" 2>&1 &
    spid=$!
  fi
  if [ $MODE = loopback ]; then
    sleep 0.3
    run_client "$t" "$port" "$SELF_IP"; crc=$?
    wait "$spid"; src=$?
  elif [ "$NODE" = 0 ]; then
    wait "$spid"; src=$? crc=0
    [ $src = 0 ] || { echo "perftest $t mode=pair FAILED (server rc=$src)"; fail=1; }
    [ $VERBOSE = 1 ] && cat "$TMP/$t.server" >&2
    continue
  else
    run_client "$t" "$port" "$PEER_IP"; crc=$? src=0
  fi
  [ $VERBOSE = 1 ] && { cat "$TMP/$t.client" >&2; [ -f "$TMP/$t.server" ] && cat "$TMP/$t.server" >&2; }
  if [ $crc = 0 ] && [ $src = 0 ] && report "$t" "$TMP/$t.client"; then :; else
    echo "perftest $t mode=$MODE FAILED (client rc=$crc server rc=$src)"
    sed 's/^/  | /' "$TMP/$t.client" >&2
    fail=1
  fi
done
exit $fail
