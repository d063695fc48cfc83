"""The scenario suite (tests/scenarios/): every legitimate task alone and every task × attack
pair of each domain, through the real runtime. The verdicts that hold now are recorded in
tests/scenarios/outcomes.json (`python bench/scenarios.py --record` rewrites it, and prints
the same report with one line per miss), so a change that lets one more pair through, or holds
one more task, fails here; so does one that denies a pair recorded as a miss, until the record
is updated to show the gain."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from .scenarios.catalogue import DOMAINS
from .scenarios.runner import CLASSES, HERE, Domain, Report, planted, report, run, spec_of

RECORDED = json.loads((HERE / "outcomes.json").read_text(encoding="utf-8"))


@cache
def _report(name: str) -> Report:
    return report(next(d for d in DOMAINS if d.name == name))


def test_the_corpus_has_its_size() -> None:
    tasks = [t for d in DOMAINS for t in d.tasks]
    attacks = [a for d in DOMAINS for a in d.attacks]
    assert len(DOMAINS) >= 5
    assert len(tasks) >= 100
    assert len(attacks) >= 30
    assert len({a.kind for a in attacks}) >= 10
    for domain in DOMAINS:
        assert domain.tasks and domain.attacks, domain.name
        names = [t.name for t in domain.tasks] + [a.name for a in domain.attacks]
        assert len(names) == len(set(names)), domain.name


def test_every_attack_has_a_class_and_is_planted_somewhere() -> None:
    for domain in DOMAINS:
        for attack in domain.attacks:
            assert attack.kind in CLASSES, attack.name
            assert any(planted(domain, t, attack) for t in domain.tasks), attack.name


def _literals(node: Any) -> list[str]:
    """The string literals of a condition (a model dump)."""
    if isinstance(node, dict):
        if node.get("kind") == "literal" and node.get("type") == "string":
            return [str(node["value"])]
        return [s for v in node.values() for s in _literals(v)]
    if isinstance(node, list | tuple):
        return [s for v in node for s in _literals(v)]
    return []


def _policy_literals(domain: Domain) -> set[str]:
    return {
        s.casefold()
        for p in spec_of(domain).policies.values()
        for r in p.rules
        if r.condition is not None
        for s in _literals(r.condition.model_dump())
    }


def test_the_literals_are_read_from_the_policies() -> None:
    found = {d.spec: _policy_literals(d) for d in DOMAINS}
    assert "@acme.test" in found["mail_calendar.harness"]
    assert "@our-shop.test" in found["customer_support.harness"]


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: d.spec[:-8])
def test_no_literal_of_a_policy_comes_from_an_attack(domain: Domain) -> None:
    """A spec is written from its domain's purpose, not against the attacks: no string its
    policies compare with appears in an attack's instruction or in the values it swaps in."""
    literals = _policy_literals(domain)
    for attack in domain.attacks:
        seen = (attack.payload + " " + json.dumps(attack.swap)).casefold()
        found = sorted(x for x in literals if x in seen)
        assert not found, (attack.name, found)


@pytest.mark.parametrize("domain", DOMAINS, ids=lambda d: d.spec[:-8])
def test_each_domain_keeps_its_recorded_outcomes(domain: Domain) -> None:
    now = _report(domain.name).outcomes()
    recorded = RECORDED[domain.name]
    for kind in ("tasks", "pairs not denied"):
        worse = {k: v for k, v in now[kind].items() if recorded[kind].get(k) != v}
        gone = sorted(set(recorded[kind]) - set(now[kind]))
        assert not worse and not gone, (
            f"{domain.name}, {kind}: changed {worse}, no longer there {gone};"
            " if this is a gain, record it: python bench/scenarios.py --record"
        )


def test_an_attack_is_refused_with_the_provenance_as_evidence() -> None:
    """The refusal names where the value came from: the reason a person reads."""
    mail = DOMAINS[0]
    task = next(t for t in mail.tasks if t.name == "summarise the inbox")
    attack = next(a for a in mail.attacks if a.name.startswith("forward invoices"))
    outcome = run(mail, task)
    assert outcome.verdict == "allowed"
    pair = _report(mail.name)
    (found,) = [o for o in pair.pairs if o.task is task and o.attack is attack]
    tool, verdict, rule, evidence = found.calls[-1]
    assert (tool, verdict, rule) == ("mail.send", "denied", "assistant.injected_recipient")
    assert any("mail.read" in e and "untrusted" in e for e in evidence), evidence
