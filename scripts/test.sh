#!/usr/bin/env bash
# The whole test suite: set up, then lint, format-check and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest "$@"
