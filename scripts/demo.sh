#!/usr/bin/env bash
# The main job: set up, then check, lint, test and format-check the example specs, and build one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
for spec in examples/remediation/remediation.harness examples/workspace-agent/workspace.harness; do
  .venv/bin/harnessc check "$spec"
  .venv/bin/harnessc lint --strict "$spec"
  .venv/bin/harnessc test "$spec"
done
.venv/bin/harnessc fmt --check examples/*/*.harness stdlib/*.harness
.venv/bin/harnessc build examples/remediation/remediation.harness -o build/remediation
echo "examples: checked, linted, tested, canonically formatted; remediation built into build/remediation"
