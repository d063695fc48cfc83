#!/usr/bin/env bash
# The main job: set up; check, lint, test and format-check the example specs; then build each
# example and run its application, a scripted planner through the generated runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh demo
for spec in examples/remediation/remediation.harness examples/workspace-agent/workspace.harness; do
  .venv/bin/harnessc check "$spec"
  .venv/bin/harnessc lint --strict "$spec"
  .venv/bin/harnessc test "$spec"
done
.venv/bin/harnessc fmt --check examples/*/*.harness stdlib/*.harness
# Each app builds its spec into build/<example> (--build) and records its events in
# build/<example>.db, a SQLite file that every run appends to and verifies.
.venv/bin/python examples/workspace-agent/app.py --build
.venv/bin/python examples/remediation/app.py --build
echo "examples: checked, linted, tested, canonically formatted; both built into build/ and run"
