"""The time budget of one question of the policy analysis (a z3 query), from the environment.

Read without loading z3, by the analysis and by the lint that reports a question not decided
in time (L006).
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_TIMEOUT_MS", "TIMEOUT_VARIABLE", "query_timeout_ms"]

TIMEOUT_VARIABLE = "HARNESSC_QUERY_TIMEOUT_MS"
DEFAULT_TIMEOUT_MS = 2_000
"""The time z3 may take over one question (docs/cli.md); an answer it does not reach in time is
reported as not decided (L006), never taken as sat or unsat."""


def query_timeout_ms() -> int:
    """The time budget of one query: `$HARNESSC_QUERY_TIMEOUT_MS` (a positive whole number of
    milliseconds), else 2 s."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_TIMEOUT_MS
