"""Exact policy analysis over the typed model."""

from __future__ import annotations

from dataclasses import dataclass, field

from harnessc.runtime.model import Spec


@dataclass
class PolicyAnalysis:
    """What the analysis found: findings for lints, and a witness call per rule that can fire."""

    findings: list = field(default_factory=list)
    witnesses: dict = field(default_factory=dict)


def analyse_policies(spec: Spec) -> PolicyAnalysis:
    return PolicyAnalysis()
