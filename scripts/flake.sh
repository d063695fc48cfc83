#!/usr/bin/env bash
# Run the test suite N times under extra CPU load and print how often each test failed.
#
#   scripts/flake.sh N [--subset] [-- PYTEST_ARGS...]
#   scripts/flake.sh --list
#
# N             how many runs (default 3)
# --subset      only the tests that wait on threads, processes, servers or clocks (the `timing`
#               mark, given by tests/timing.py); the runs a timing-sensitive change needs
# --list        print the modules of that subset and exit
# LOAD=K        K CPU-burning workers beside the suite (default: as many as the machine has
#               cores), with Debian's stress-ng when installed, else Python loops
#
# Each run's JUnit report is kept in $FLAKE_DIR (default a new temporary folder); the summary
# ends with one line per test that failed at least once, "failures/runs test", and the exit
# status is 1 when any test failed in any run.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=3
SUBSET=0
PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --list) exec .venv/bin/python tests/timing.py ;;
    --subset) SUBSET=1 ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    [0-9]*) RUNS="$1" ;;
    *) echo "usage: scripts/flake.sh [N] [--subset] [-- PYTEST_ARGS...] | --list" >&2; exit 2 ;;
  esac
  shift
done
scripts/setup.sh test
LOAD="${LOAD:-$(nproc)}"
FLAKE_DIR="${FLAKE_DIR:-$(mktemp -d -t harnessc-flake-XXXXXX)}"
mkdir -p "$FLAKE_DIR"
[ "$SUBSET" = 1 ] && PYTEST_ARGS=(-m timing "${PYTEST_ARGS[@]}")

burners=()
stop_load() { for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_load EXIT
if [ "$LOAD" -gt 0 ]; then
  if command -v stress-ng >/dev/null; then
    stress-ng --cpu "$LOAD" --quiet &
    burners+=("$!")
  else
    for _ in $(seq "$LOAD"); do
      .venv/bin/python -c 'while True: pass' &
      burners+=("$!")
    done
  fi
fi
echo "flake: $RUNS run(s), ${LOAD} CPU burner(s), reports in $FLAKE_DIR"
for i in $(seq "$RUNS"); do
  start=$(date +%s)
  status=0
  .venv/bin/python -m pytest -q -p no:cacheprovider --junitxml="$FLAKE_DIR/run-$i.xml" \
    "${PYTEST_ARGS[@]}" >"$FLAKE_DIR/run-$i.log" 2>&1 || status=$?
  echo "flake: run $i exited $status in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg)): $(tail -n 1 "$FLAKE_DIR/run-$i.log")"
done
stop_load
.venv/bin/python - "$FLAKE_DIR" "$RUNS" <<'PY'
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

folder, runs = Path(sys.argv[1]), int(sys.argv[2])
failed: Counter[str] = Counter()
for report in sorted(folder.glob("run-*.xml")):
    for case in ET.parse(report).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed[f"{case.get('classname')}::{case.get('name')}"] += 1
print(f"flake: {len(failed)} test(s) failed in at least one of {runs} run(s)")
for name, count in sorted(failed.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"{count}/{runs} {name}")
sys.exit(1 if failed else 0)
PY
