# Sourced (bash) by tools/run_tests.sh and tests/verbs/run_guest_tests.sh:
# one long-running child at a time, in the background, with its output in a
# log that is shown as it grows; a signal to the calling script ends it.
#
# run_child LOG SHOW CMD [ARG...]
#   Runs CMD with stdout and stderr to LOG, and pipes LOG as it grows
#   through SHOW, a command (typically a function of the caller) that
#   filters or decorates its stdin; returns CMD's exit status once CMD has
#   ended and SHOW has seen all of LOG. CMD runs in the background so that a
#   signal to the calling script reaches this shell at once (a foreground
#   child would delay the trap until it ended): see run_child_trap.
#
# run_child_trap MESSAGE
#   From now on INT, TERM and HUP to the calling script send TERM to the
#   running child, if any (by pid), wait for it, print MESSAGE to stderr and
#   exit 130: a run that was cut short never reads as a pass.

RUN_CHILD_PID=0

run_child() {
  local log=$1 show=$2 rc copier
  shift 2
  "$@" >"$log" 2>&1 &
  RUN_CHILD_PID=$!
  tail -n +1 -f --pid="$RUN_CHILD_PID" "$log" | "$show" &
  copier=$!
  wait "$RUN_CHILD_PID"
  rc=$?
  wait "$copier" 2>/dev/null
  RUN_CHILD_PID=0
  return "$rc"
}

RUN_CHILD_MESSAGE=""
run_child_on_signal() {
  if [[ $RUN_CHILD_PID -ne 0 ]]; then
    kill -TERM "$RUN_CHILD_PID" 2>/dev/null
    wait "$RUN_CHILD_PID" 2>/dev/null
  fi
  echo "$RUN_CHILD_MESSAGE" >&2
  exit 130
}

run_child_trap() {
  RUN_CHILD_MESSAGE=$1
  trap run_child_on_signal INT TERM HUP
}
