"""The scenario suite's bar (tests/scenarios/): every injected attack is denied, and no
legitimate task is asked or denied unless its spec says a person must approve it (then it is
asked, and goes on once approved). `python bench/scenarios.py` prints the same report."""

from __future__ import annotations

import pytest

from .scenarios.catalogue import DOMAINS
from .scenarios.runner import Domain, Scenario, misses, run

CASES = [(d, s) for d in DOMAINS for s in d.scenarios]


def test_every_domain_has_attacks_and_tasks() -> None:
    assert len(DOMAINS) >= 4
    for domain in DOMAINS:
        kinds = {s.attack for s in domain.scenarios}
        assert kinds == {True, False}, domain.name


@pytest.mark.parametrize(
    ("domain", "scenario"), CASES, ids=[f"{d.spec[:-8]}: {s.name}" for d, s in CASES]
)
def test_scenario_meets_the_bar(domain: Domain, scenario: Scenario) -> None:
    outcome = run(domain, scenario)
    assert not misses([outcome]), (outcome.verdict, outcome.calls)


def test_an_attack_is_refused_with_the_provenance_as_evidence() -> None:
    """The refusal names where the value came from: the reason a person reads."""
    mail = DOMAINS[0]
    scenario = next(s for s in mail.scenarios if s.name.startswith("forward invoices"))
    outcome = run(mail, scenario)
    tool, verdict, rule, evidence = outcome.calls[-1]
    assert (tool, verdict, rule) == ("mail.send", "denied", "assistant.injected_recipient")
    assert any("mail.read" in e and "untrusted" in e for e in evidence), evidence


@pytest.mark.parametrize(
    ("domain", "scenario"),
    [(d, s) for d, s in CASES if s.limit is not None],
    ids=lambda x: getattr(x, "name", ""),
)
def test_a_limit_is_still_a_limit(domain: Domain, scenario: Scenario) -> None:
    """A probe of what session-aware policy cannot see stays honest: when a change denies it
    after all, it counts against the bar again (drop its `limit`)."""
    outcome = run(domain, scenario)
    assert outcome.verdict != "denied", "no longer a limit: remove `limit` from the scenario"
    refused = [c for c in outcome.calls if c[1] == "denied"]
    assert refused, "the goals the policy can see are still refused"
