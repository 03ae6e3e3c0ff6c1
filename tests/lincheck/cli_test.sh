#!/bin/bash
# lincheck_cli and recheck.py on the saved histories in testdata/: verdicts and
# exit codes (0 ok, 1 illegal, 2 bad input, 3 unknown).
set -u

CLI=tests/lincheck/lincheck_cli
RECHECK=tests/lincheck/recheck.py
DATA=tests/lincheck/testdata
failures=0

expect() {  # expect STATUS COMMAND...
  local want=$1
  shift
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: '$*' exited $got, want $want"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: '$*' -> $got"
  fi
}

expect 0 "$CLI" --help
expect 2 "$CLI"
expect 2 "$CLI" --bogus "$DATA/map_ok.jsonl"
expect 2 "$CLI" "$DATA/does_not_exist.jsonl"
expect 2 "$CLI" --model=nope "$DATA/map_ok.jsonl"
expect 2 "$CLI" --model=queue "$DATA/map_ok.jsonl"
expect 2 "$CLI" "$DATA/malformed.jsonl"

for f in "$DATA"/*_ok.jsonl; do expect 0 "$CLI" "$f"; done
for f in "$DATA"/*_bad.jsonl; do expect 1 "$CLI" "$f"; done
# The same file through the generic search only, and unpartitioned.
expect 1 "$CLI" --generic "$DATA/queue_overtake_bad.jsonl"
expect 1 "$CLI" --no_partition "$DATA/map_lost_update_bad.jsonl"
# Standard input, and a model given on the command line.
expect 1 "$CLI" --model=map - < "$DATA/map_lost_update_bad.jsonl"
# A 300-operation queue history: the queue decider settles it; the generic
# search with a zero timeout cannot, and says unknown.
expect 0 "$CLI" "$DATA/queue_long.jsonl"
expect 3 "$CLI" --generic --timeout=0 "$DATA/queue_long.jsonl"

# The independent checker agrees.
PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=$(command -v python3 || true)
if [[ -n $PYTHON ]]; then
  for f in "$DATA"/*_ok.jsonl; do expect 0 "$PYTHON" "$RECHECK" "$f"; done
  for f in "$DATA"/*_bad.jsonl; do
    expect 1 "$PYTHON" "$RECHECK" "$f"
  done
  expect 2 "$PYTHON" "$RECHECK" "$DATA/malformed.jsonl"
else
  echo "python3 not found: skipping recheck.py"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo PASS
