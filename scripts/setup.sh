#!/usr/bin/env bash
# Create .venv (once) and install harnessc with its development tools, from the registries.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, pinned: the CPU wheel this machine keeps on disk (pip's find-links). Installed
# after the embed extra instead, pip would resolve sentence-transformers' torch from the index
# and pull a multi-GB CUDA build; with torch present, the extra keeps it.
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -e '.[dev,embed,workflows]'
