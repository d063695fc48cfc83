#!/usr/bin/env bash
# The whole test suite: set up, then lint, format-check, type-check and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m mypy
# Every example builds, and the test suite the compiler generates from its spec passes.
generated="$(mktemp -d)"
trap 'rm -rf "$generated"' EXIT
for spec in $(grep -l '^harness ' examples/*/*.harness); do
  .venv/bin/harnessc build "$spec" -o "$generated" --no-embed -q
done
.venv/bin/python -m pytest -q -W error -p no:cacheprovider "$generated"
.venv/bin/python -m pytest "$@"
