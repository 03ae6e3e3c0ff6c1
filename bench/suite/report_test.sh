#!/bin/bash
# Runs report_test.py (unittest) with Debian's python3, which has matplotlib.
set -u
D="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-rdmads}/bench/suite}"
D="${D:-$(cd "$(dirname "$0")" && pwd)}"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
REPORT_PY="$D/report.py" exec "$PY" "$D/report_test.py"
