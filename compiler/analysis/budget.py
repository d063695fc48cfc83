"""The time budget of one question of the policy analysis (a z3 query), from the environment.

Read without loading z3, by the analysis and by the lint that reports a question not decided
in time (L006).
"""

from __future__ import annotations

import os

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "RLIMIT_VARIABLE",
    "TIMEOUT_VARIABLE",
    "query_rlimit",
    "query_timeout_ms",
]

TIMEOUT_VARIABLE = "HARNESSC_QUERY_TIMEOUT_MS"
RLIMIT_VARIABLE = "HARNESSC_QUERY_RLIMIT"
DEFAULT_TIMEOUT_MS = 2_000
"""The time z3 may take over one question (docs/cli.md); an answer it does not reach in time is
reported as not decided (L006), never taken as sat or unsat."""


def query_timeout_ms() -> int:
    """The time budget of one query: `$HARNESSC_QUERY_TIMEOUT_MS` (a positive whole number of
    milliseconds), else 2 s."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_TIMEOUT_MS


def query_rlimit() -> int:
    """A budget of one query in z3's resource units, `$HARNESSC_QUERY_RLIMIT` (0, the default:
    none). Unlike time, it runs out at the same point on every machine and under any load, so
    a run that must decide exactly the same questions everywhere (a golden test, a reproducible
    build) sets it; the time budget still applies."""
    raw = os.environ.get(RLIMIT_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() else 0
