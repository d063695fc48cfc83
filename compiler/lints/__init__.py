"""Lint rules over a checked spec: warnings and notes with a code `Lxxx`, each with its own docs.

A rule is a function registered with `@lint_rule(CODE, bad=…, good=…)` (see `framework.py`); it
receives a `LintContext` (the typed model, the resolution for spans, the policy analysis) and
yields diagnostics. The code's slug, severity, summary and explanation are in `dsl/codes.py`
with every other code, so `harnessc explain`, `--select`/`--ignore`, suppressions and every
output format know it whether or not the rules are loaded.

To add a rule: add the next free code to `dsl/codes.py`, write the check in the module of its
topic with a `bad` and a `good` example, add a fixture
`tests/diagnostics/cases/Lxxx-slug.harness`, record its golden and run
`python tools/gen_docs.py`.
"""

from __future__ import annotations

from harnessc.dsl.diagnostics import Diagnostic

from ..analysis.policy import PolicyAnalysis
from ..config import LintConfig
from ..resolve import Resolution
from ..suppress import (
    Findings,
    Suppression,
    filter_findings,
    lint_suppressions,
    split_findings,
)

# importing the rule modules registers their rules
from . import analysis as _analysis_rules  # noqa: F401
from . import delegation, descriptions, paths, policies, session, surfaces, unused  # noqa: F401
from .framework import RULES, LintContext, LintRule, lint_rule

__all__ = [
    "RULES",
    "Findings",
    "LintContext",
    "LintRule",
    "Suppression",
    "filter_findings",
    "lint_rule",
    "lint_suppressions",
    "run_lints",
    "split_findings",
]


def run_lints(
    spec, resolution: Resolution, analysis: PolicyAnalysis | None, config: LintConfig | None = None
) -> list[Diagnostic]:
    """Every enabled rule over a valid model; findings in `std.*` modules are left out (a
    spec cannot change them; lint the standard library's files directly to see them)."""
    config = config or LintConfig()
    context = LintContext(spec, resolution, analysis)
    found: list[Diagnostic] = []
    for code in sorted(RULES):
        if not config.enabled(code):
            continue
        for diagnostic in RULES[code].check(context):
            primary = diagnostic.primary
            if primary is not None and context.is_std(primary.span):
                continue
            found.append(diagnostic)
    return found
