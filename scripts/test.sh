#!/usr/bin/env bash
# The whole test suite: set up, then lint, format-check, type-check, check the import contracts
# and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy and import-linter read the package as installed: build/package (scripts/package_tree.py)
.venv/bin/python scripts/package_tree.py
.venv/bin/python -m mypy
.venv/bin/python scripts/package_tree.py lint-imports --no-logo
# Every example builds, and the test suite the compiler generates from its spec passes.
generated="$(mktemp -d)"
trap 'rm -rf "$generated"' EXIT
for spec in $(grep -l '^harness ' examples/*/*.harness); do
  .venv/bin/harnessc build "$spec" -o "$generated" --no-embed -q
done
.venv/bin/python -m pytest -q -W error -p no:cacheprovider "$generated"
.venv/bin/python -m pytest "$@"
