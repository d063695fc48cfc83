#!/usr/bin/env bash
# The main job: set up, then check and format-check the example spec and the standard library.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/harnessc check examples/remediation/remediation.harness stdlib/*.harness
.venv/bin/harnessc fmt --check examples/remediation/*.harness stdlib/*.harness
echo "examples and stdlib: checked and canonically formatted"
