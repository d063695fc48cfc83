"""The budgets of the policy analysis, from the environment: z3's resource units per question
(`rlimit`), and the wall-clock limit of a whole command.

Each question the analysis asks z3 has a budget in z3's own resource units, not in seconds:
z3 counts the same units for the same question on every machine and under any load, so a
question it gives up on is given up on everywhere, and the same spec gets the same findings on
an idle laptop and on a busy CI machine. Time is only an outer limit on a whole command
(`command_timeout_s`): running out of it aborts the command with `EXIT_TIMEOUT` and a message,
never a finding.

Read without loading z3, by the analysis, the lint that reports a question not decided within
its budget (L006), and the command line.
"""

from __future__ import annotations

import os

__all__ = [
    "DEFAULT_RLIMIT",
    "DEFAULT_TIMEOUT_S",
    "EXIT_TIMEOUT",
    "RLIMIT_VARIABLE",
    "TIMEOUT_VARIABLE",
    "budget_key",
    "command_timeout_s",
    "out_of_budget",
    "out_of_time",
    "query_rlimit",
    "spent",
]

RLIMIT_VARIABLE = "HARNESSC_QUERY_RLIMIT"
DEFAULT_RLIMIT = 5_000_000
"""z3's resource units one question may take (docs/cli.md, "The budget of a question").

Calibrated with bench/rlimit.py over every spec of the repository and the realistic 50-tool
policy, with no budget: of about 1,550 questions the median takes about 110 units, the 99th
percentile about 550,000 and the heaviest about 1,460,000 (a `startswith` over `*` rules on a
tool with path arguments, 3.4 s of CPU), so the default is more than three times what the
heaviest real question needs, and every spec's findings under it are those under no budget
(`bench/rlimit.py --compare`). z3's string solver, the slowest theory the encoding uses, does
about 740,000 units per second of CPU on the 2-core machine it was measured on: a
pathological question is given up on after about 7 s of CPU."""

TIMEOUT_VARIABLE = "HARNESSC_TIMEOUT"
DEFAULT_TIMEOUT_S = 900.0
"""The wall-clock limit of a whole command that runs the analysis (check, lint, build, test,
diff, why): an outer abort for a command that would otherwise run on and on, never a
finding."""

EXIT_TIMEOUT = 124
"""The exit status of a command aborted by its wall-clock limit (as `timeout(1)` exits)."""


def query_rlimit() -> int:
    """The budget of one question in z3's resource units: `$HARNESSC_QUERY_RLIMIT` (a whole
    number; 0 for none), else `DEFAULT_RLIMIT`."""
    raw = os.environ.get(RLIMIT_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() else DEFAULT_RLIMIT


def budget_key() -> str:
    """What a cached answer of z3's is keyed by besides its question: an answer given up on
    under one budget may be decided under a larger one, and never stands for it."""
    return f"rlimit {query_rlimit()}"


def command_timeout_s() -> float:
    """The wall-clock limit of a command in seconds: `$HARNESSC_TIMEOUT` (a positive number;
    0 for none), else `DEFAULT_TIMEOUT_S`."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value >= 0 and value == value and value != float("inf") else DEFAULT_TIMEOUT_S


def out_of_time(reason: str) -> bool:
    """z3 stopped for the clock or an interruption: an answer that depends on the machine and
    is never kept. (The analysis sets no time limit on a question; a reason of this kind is
    only met when a caller does.)"""
    return reason == "timeout"


def spent(rlimit: int) -> str:
    """Why a question was not decided when z3 used up its budget (z3 itself says `canceled`),
    in the same words on every machine."""
    return f"beyond its budget of {rlimit:,} resource units, {RLIMIT_VARIABLE}"


def out_of_budget(reason: str) -> bool:
    """z3 gave up on a question for lack of resource units: the same on every machine, so
    kept like any answer (keyed by the budget, `budget_key`)."""
    return reason.startswith("beyond its budget") or reason == "canceled" or "resource" in reason
