#!/usr/bin/env bash
# Runs a standalone ZooKeeper server for rdmads jobs: the coordinator that
# keeps a job's membership (docs/design.md §5, "Membership"). Uses Debian's
# zookeeper package (tools/setup_deps.sh installs it).
#   tools/coordinator.sh [OPTIONS]                      in the foreground; Ctrl-C stops it
#   tools/coordinator.sh start --pidfile F [OPTIONS]    in the background; prints host:port once it listens
#   tools/coordinator.sh stop --pidfile F               stops the one `start` left in F
# Options: --host H (default 127.0.0.1; the address jobs reach it at),
#          --port P (default 2181; 0 = a free port), --dir D (its config and
#          data; default a new temporary directory, removed by stop).
# A job uses it with RDMADS_COORDINATOR=<host>:<port>. One server is one
# point of failure; for production run a three-server ensemble (ZooKeeper's
# own documentation) and list all three in RDMADS_COORDINATOR.
set -euo pipefail

mode=run host=127.0.0.1 port=2181 dir="" pidfile=""
die() { echo "coordinator.sh: $*" >&2; exit 2; }
if [[ $# -gt 0 && ( $1 == start || $1 == stop ) ]]; then mode=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --host) host=${2:?}; shift 2 ;;
    --port) port=${2:?}; shift 2 ;;
    --dir) dir=${2:?}; shift 2 ;;
    --pidfile) pidfile=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[[ $port =~ ^[0-9]+$ && $port -le 65535 ]] || die "--port must be 0..65535, got '$port'"

if [[ $mode == stop ]]; then
  [[ -n $pidfile ]] || die "stop needs --pidfile"
  [[ -f $pidfile ]] || exit 0
  read -r pid d <"$pidfile" || true
  if [[ -n ${pid:-} ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  [[ -n ${d:-} && -f ${d}/.rdmads-coordinator ]] && rm -rf "$d"
  rm -f "$pidfile"
  exit 0
fi

command -v java >/dev/null || die "java not found: run tools/setup_deps.sh (package zookeeper)"
ls /usr/share/java/zookeeper*.jar >/dev/null 2>&1 || die "ZooKeeper's jars are missing: run tools/setup_deps.sh"
if [[ $port == 0 ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
if [[ -z $dir ]]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmads-coordinator.XXXXXX")
  touch "$dir/.rdmads-coordinator"  # ours to remove
fi
mkdir -p "$dir/data"
cat >"$dir/zoo.cfg" <<EOC
tickTime=100
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=$host
admin.enableServer=false
minSessionTimeout=200
maxSessionTimeout=60000
EOC
cmd=(java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m -cp "/usr/share/java/*:/etc/zookeeper/conf"
     org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg")
if [[ $mode == run ]]; then
  echo "coordinator.sh: ZooKeeper on $host:$port (data in $dir); use RDMADS_COORDINATOR=$host:$port" >&2
  exec "${cmd[@]}"
fi
[[ -n $pidfile ]] || die "start needs --pidfile"
"${cmd[@]}" >"$dir/server.log" 2>&1 &
pid=$!
echo "$pid $dir" >"$pidfile"
for _ in $(seq 1 600); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "coordinator.sh: the server exited; its log:" >&2; tail -n 20 "$dir/server.log" >&2; exit 1
  fi
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then echo "$host:$port"; exit 0; fi
  sleep 0.1
done
echo "coordinator.sh: no answer on $host:$port within 60 s; its log:" >&2
tail -n 20 "$dir/server.log" >&2
"$0" stop --pidfile "$pidfile"
exit 1
