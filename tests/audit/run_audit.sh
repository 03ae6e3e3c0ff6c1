#!/usr/bin/env bash
# Removes each audited concurrency check in turn and runs the test that must
# catch it (tests/README.md, "Concurrency checks and the tests that catch
# them").
#
#   tests/audit/run_audit.sh            every mutant in tests/audit/mutants.tsv
#   tests/audit/run_audit.sh ID...      only those
#   tests/audit/run_audit.sh --list     the mutants, one a line
#
# Per mutant: a scratch worktree of HEAD (kept under $AUDIT_DIR, default
# ~/.cache/rdmads-audit, with its own Bazel output root so the main tree's
# cache is untouched), reset to HEAD, the mutant's patch applied, then
# `bazel test TARGET --test_filter=FILTER`. Verdicts:
#   caught   the test failed (or timed out): the check is needed
#   MISSED   the test passed without the check
#   BROKEN   the patch does not apply or the mutant does not build
# Ends with "N caught, N missed, N broken" and exits 0 only when every
# mutant was caught. Run it on a committed tree: it audits HEAD.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
manifest="$root/tests/audit/mutants.tsv"
audit_dir=${AUDIT_DIR:-$HOME/.cache/rdmads-audit}
tree="$audit_dir/tree"

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
rows() { grep -vE '^(#|\s*$)' "$manifest"; }

want=()
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --list) rows | cut -f1,4; exit 0 ;;
    -*) echo "run_audit.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) want+=("$arg") ;;
  esac
done
for id in "${want[@]}"; do
  rows | cut -f1 | grep -qx "$id" || { echo "run_audit.sh: no mutant '$id' in $manifest (try --list)" >&2; exit 2; }
done

mkdir -p "$audit_dir"
if [[ ! -d "$tree/.git" && ! -f "$tree/.git" ]]; then
  git -C "$root" worktree add --detach "$tree" HEAD >/dev/null || { echo "run_audit.sh: cannot create $tree" >&2; exit 2; }
fi
head=$(git -C "$root" rev-parse HEAD)

caught=0 missed=0 broken=0 summary=()
while IFS=$'\t' read -r id target filter what; do
  if [[ ${#want[@]} -gt 0 ]] && ! printf '%s\n' "${want[@]}" | grep -qx "$id"; then continue; fi
  patch="$root/tests/audit/mutants/$id.patch"
  echo "=== $id: $what" >&2
  git -C "$tree" checkout -q --detach -f "$head" && git -C "$tree" clean -qfd
  if [[ ! -f "$patch" ]] || ! git -C "$tree" apply "$patch"; then
    broken=$((broken + 1)); summary+=("BROKEN  $id (patch missing or does not apply)"); continue
  fi
  log="$audit_dir/$id.log"
  (cd "$tree" && bazel --output_user_root="$audit_dir/bazel" test --color=no --curses=no \
     --nocache_test_results --flaky_test_attempts=1 --test_output=errors \
     ${filter:+--test_filter="$filter"} "$target") >"$log" 2>&1
  rc=$?
  case $rc in
    3) caught=$((caught + 1)); summary+=("caught  $id ($target)") ;;
    0) missed=$((missed + 1)); summary+=("MISSED  $id ($target passed without the check)") ;;
    *) broken=$((broken + 1)); summary+=("BROKEN  $id (bazel exit $rc, see $log)") ;;
  esac
done < <(rows)
git -C "$tree" checkout -q --detach -f "$head"

printf '%s\n' "${summary[@]}" >&2
echo "${caught} caught, ${missed} missed, ${broken} broken"
[[ $missed -eq 0 && $broken -eq 0 && $caught -gt 0 ]]
