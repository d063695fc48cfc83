#!/usr/bin/env bash
# Create .venv (once) and install harnessc into it, editable, from the registries.
#
#   scripts/setup.sh demo   what scripts/demo.sh needs: harnessc and its `workflows` extra (DBOS
#                           for the remediate workflow). No torch: the demo ranks lexically.
#   scripts/setup.sh test   what scripts/test.sh needs: also the `dev`, `embed`, `mcp`, `otel`
#                           and `lsp` extras (the MCP client's, telemetry's and language
#                           server's tests), after
#                           the CPU build of torch (see "The embed extra" in the README).
#
# Each step prints a line; pip prints what it collects and installs. A profile already installed
# from this pyproject.toml and this script is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${1:-test}"
PYTHON="${PYTHON:-python3}"
# --- extras per profile (one line each, so that a branch adding an extra changes one line)
DEMO_EXTRAS="workflows"
TEST_EXTRAS="dev,embed,workflows,mcp,otel,lsp,console,serve"
# --- torch for the embed extra: the CPU build, pinned as pyproject.toml pins it
TORCH="torch==2.13.0"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"

case "$PROFILE" in
  demo) EXTRAS="$DEMO_EXTRAS" ;;
  test) EXTRAS="$TEST_EXTRAS" ;;
  *) echo "usage: scripts/setup.sh [demo|test]" >&2; exit 2 ;;
esac
STAMP="$("$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(b"".join(open(f, "rb").read()
  for f in sys.argv[1:])).hexdigest()[:16])' pyproject.toml scripts/setup.sh)"
up_to_date() { [ -f ".venv/.setup-$1" ] && [ "$(cat ".venv/.setup-$1")" = "$STAMP" ]; }
# the test profile holds everything the demo profile installs
# build/package: the installed layout that mypy and import-linter read (scripts/package_tree.py)
"$PYTHON" scripts/package_tree.py
# Node packages for the test profile, each folder exactly as its committed package-lock.json pins
# it (npm ci), again whenever the lockfile changes (node_modules keeps a copy of the one installed):
# clients/typescript, the serve client's TypeScript compiler (tests/test_serve.py); tests/node_mcp,
# the MCP TypeScript SDK's client (tests/test_gateway_node.py)
npm_ci() {
  if ! cmp -s "$1/package-lock.json" "$1/node_modules/.installed-lock.json"; then
    echo "setup: npm ci in $1"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error &&
      cp package-lock.json node_modules/.installed-lock.json)
  fi
}
if [ "$PROFILE" = test ]; then
  npm_ci clients/typescript
  npm_ci tests/node_mcp
fi
if up_to_date "$PROFILE" || { [ "$PROFILE" = demo ] && up_to_date test; }; then
  echo "setup: .venv is up to date ($PROFILE)"
  exit 0
fi

step() { echo "setup: $*"; }
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
step "upgrading pip"
.venv/bin/python -m pip install --upgrade pip
if [ "$PROFILE" = test ]; then
  # torch first, pinned, the CPU build: installed by the embed extra instead, pip would take
  # sentence-transformers' torch from PyPI, a CUDA build of several GB on Linux. With torch
  # present, the extra keeps it. A wheel pip already finds without an index (its find-links,
  # as on a machine that keeps one on disk) is used as is; otherwise PyTorch's CPU index.
  if .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" \
    2>/dev/null; then
    step "$TORCH is installed"
  elif .venv/bin/python -m pip install --dry-run --quiet --no-index --no-deps "$TORCH" \
    >/dev/null 2>&1; then
    step "installing $TORCH (CPU) from pip's find-links"
    .venv/bin/python -m pip install "$TORCH"
  else
    step "installing $TORCH (CPU) from $TORCH_INDEX_URL"
    .venv/bin/python -m pip install "$TORCH" --index-url "$TORCH_INDEX_URL"
  fi
fi
step "installing harnessc (editable) with the extras $EXTRAS"
.venv/bin/python -m pip install -e ".[$EXTRAS]"
echo "$STAMP" >".venv/.setup-$PROFILE"
step "done ($PROFILE)"
