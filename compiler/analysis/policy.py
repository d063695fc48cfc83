"""Exact policy analysis over the typed model: which rules can win, with a witness call each.

For every policy, the rules are bucketed by tool: a tool's bucket holds the rules whose
selectors can match it (ids, globs, modules, packs, kinds, and the risk/effects sugar), in text
order, so the cost grows with tools × rules per tool rather than rules². A bucket is a
partition of the analysis (partition.py): its rules are encoded once over one symbolic call,
the decision of language.md §6 exactly (smt.py): rule R wins a call when it matches, no
stronger rule matches, and no earlier rule of its effect matches; z3 answers every question
about it under push/pop, each within a budget of z3's resource units (solve.py, budget.py).
Buckets with the same key (many tools under the same rules, with the same schema) are solved
once, and every partition's answers are cached on disk by that key and the budget (cache.py),
so a second check of an unchanged spec solves nothing and does not load z3. From the answers:

- a witness per rule that can win: a concrete call (re-judged by concrete.py) and its decision;
- `never-wins`: a rule that matches some call but always loses (naming the rule that beats it
  when a single one does), with an example call;
- `unsatisfiable`: a rule that matches no call at all;
- `opposite-effects`: two rules that match exactly the same calls with different effects;
- `absent-value`: a DENY or ASK reading a value that may be absent, without a `has` guard,
  that would fire if the value were there (it fails open), with the call where it does not;
- `default-allow`: a policy whose `default` is `allow`, with a call that falls to it;
- `undecided`: a rule about which z3 did not answer a question within its budget (the claims above
  about it rest on what was decided).

"Allow, except …" overlaps are the normal shape of a policy and are not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects

from .budget import budget_key, query_rlimit
from .cache import AnalysisCache
from .cells import solve_simply
from .concrete import (
    BUILTINS,
    STRENGTH,
    Call,
    Decision,
    Witness,
    decide,
    default_decision,
    schema_problems,
)
from .partition import Answers, Example, RuleKey, Undecided, partition_key, rule_key

__all__ = [
    "FINDING_KINDS",
    "Call",
    "Decision",
    "Finding",
    "PolicyAnalysis",
    "Witness",
    "analyse_policies",
    "analyse_policy",
]

FINDING_KINDS = (
    "never-wins",
    "selector-never-wins",
    "unsatisfiable",
    "opposite-effects",
    "absent-value",
    "default-allow",
    "undecided",
)

Key = tuple[str, ...]


@dataclass
class Finding:
    """One thing lint reports (L001 never-wins … L005 default-allow).

    `rule` and `other_rule` are rule labels as decisions show them (`remediation.freeze`);
    `origin` is where `rule` (or the policy's default) is written. `exact` is False when the
    claim rests on a part of a condition z3 could only approximate.
    """

    kind: str
    policy: str
    rule: str | None
    other_rule: str | None
    message: str
    example: Witness | None
    origin: m.SourceRef | None
    exact: bool = True
    selector: int | None = None
    """For `selector-never-wins`: the position of the selector in the rule."""


@dataclass
class PolicyAnalysis:
    """What the analysis found: findings for lints, and a witness call per rule that can fire.

    `witnesses[policy][rule_label]` — one policy may include another's rules, so the same label
    can have a witness under several policies.
    """

    findings: list[Finding] = field(default_factory=list)
    witnesses: dict[str, dict[str, Witness]] = field(default_factory=dict)
    queries: int = 0
    """SMT queries asked: the analysis's work, independent of the machine's load."""
    decided: int = 0
    """Questions answered exactly without z3, for partitions whose conditions are simple."""
    partitions: int = 0
    """Distinct partitions the policies were cut into (each solved once, or read back)."""
    cache_hits: int = 0
    """Partitions whose answers were read from the cache on disk."""

    def witness(self, policy: str, rule: str) -> Witness | None:
        return self.witnesses.get(policy, {}).get(rule)


def analyse_policies(
    spec: m.Spec, *, partition: bool = True, cache: AnalysisCache | None = None
) -> PolicyAnalysis:
    """Stage analyse: every policy of the spec, in name order.

    `partition=False` encodes every rule of the policy in every tool's bucket and shares no
    answers between tools (the same analysis, done the long way: tests compare the two);
    `cache` is where answers are kept (default: in memory for this run and on disk).
    """
    if cache is None:
        cache = AnalysisCache(on_disk=partition)
    analysis = PolicyAnalysis()
    for name in sorted(spec.policies):
        _PolicyAnalyser(spec, spec.policies[name], analysis, cache, partition).run()
    analysis.partitions = len(cache.memory)
    analysis.cache_hits = cache.hits
    return analysis


def analyse_policy(
    spec: m.Spec, policy: m.Policy, analysis: PolicyAnalysis | None = None
) -> PolicyAnalysis:
    analysis = analysis if analysis is not None else PolicyAnalysis()
    _PolicyAnalyser(spec, policy, analysis, AnalysisCache()).run()
    return analysis


# ---------------------------------------------------------------------------------------------
# Which rules can match which tools


def _static_selects(sel: m.Selector, tool: m.Tool) -> bool:
    """Whether the selector can match some call to the tool (sugar: for some operation)."""
    views = [{"risk": op.risk, "effects": op.effects} for op in tool.operations.values()]
    if not views:
        return selects(sel, tool)
    return any(selects(sel, tool, view) for view in views)


class RuleIndex:
    """Rules by the tools they can match, without testing every rule against every tool: ids,
    modules, packs and kinds by their value, globs by their prefix (a tool's id is looked up
    by each of its prefixes), `*` everywhere; only the risk/effects sugar is tested per tool."""

    def __init__(self, rules: tuple[m.Rule, ...]) -> None:
        self.rules = rules
        self.by_id: dict[str, set[int]] = {}
        self.by_prefix: dict[str, set[int]] = {}
        self.by_pack: dict[str, set[int]] = {}
        self.by_kind: dict[str, set[int]] = {}
        self.everywhere: set[int] = set()
        self.scan: list[tuple[int, m.Selector]] = []
        for i, rule in enumerate(rules):
            for sel in rule.selectors:
                if sel.kind == "id":
                    self.by_id.setdefault(sel.value, set()).add(i)
                elif sel.kind == "module":
                    for tool_id in sel.tools:
                        self.by_id.setdefault(tool_id, set()).add(i)
                elif sel.kind == "glob":
                    self.by_prefix.setdefault(sel.value, set()).add(i)
                elif sel.kind == "all":
                    self.everywhere.add(i)
                elif sel.kind == "pack":
                    self.by_pack.setdefault(sel.value, set()).add(i)
                elif sel.kind == "kind":
                    self.by_kind.setdefault(sel.value, set()).add(i)
                else:
                    self.scan.append((i, sel))
        self.lengths = sorted({len(prefix) for prefix in self.by_prefix})

    def bucket(self, tool: m.Tool) -> list[int]:
        found = self.everywhere | self.by_id.get(tool.id, set())
        for n in self.lengths:
            if n > len(tool.id):
                break
            found |= self.by_prefix.get(tool.id[:n], set())
        for pack in tool.packs:
            found |= self.by_pack.get(pack, set())
        found |= self.by_kind.get(tool.kind, set())
        found |= {i for i, sel in self.scan if i not in found and _static_selects(sel, tool)}
        return sorted(found)


# ---------------------------------------------------------------------------------------------
# Text


def _key_text(key: Key) -> str:
    return ".".join(key[1:]) if key[0] == "fact" else ".".join(key)


# ---------------------------------------------------------------------------------------------
# One policy


def _paths(cond: object) -> Iterator[m.Path]:
    if isinstance(cond, m.Path):
        yield cond
    elif isinstance(cond, m.Compare):
        yield from _paths(cond.left)
        yield from _paths(cond.right)
    elif isinstance(cond, m.And | m.Or):
        for item in cond.items:
            yield from _paths(item)
    elif isinstance(cond, m.Not):
        yield from _paths(cond.item)
    elif isinstance(cond, m.ListValue):
        for item in cond.items:
            yield from _paths(item)
    elif isinstance(cond, m.Length):
        yield from _paths(cond.of)  # absent with its value (session terms read no call value)


def _guarded(cond: object) -> set[Key]:
    """Values whose presence the condition tests with `has`."""
    out: set[Key] = set()
    if isinstance(cond, m.Compare):
        if (
            cond.op == "has"
            and isinstance(cond.left, m.Path)
            and isinstance(cond.right, m.EnumMember)
        ):
            out.add((*_key(cond.left), cond.right.name))
    elif isinstance(cond, m.And | m.Or):
        for item in cond.items:
            out |= _guarded(item)
    elif isinstance(cond, m.Not):
        out |= _guarded(cond.item)
    return out


def _key(path: m.Path) -> Key:
    return (path.root, *path.parts)


def _reads(rule: m.Rule) -> list[Key]:
    """Values the rule's condition reads that a call may lack, without a `has` guard."""
    if rule.condition is None:
        return []
    guarded = _guarded(rule.condition)
    found: list[Key] = []
    for path in _paths(rule.condition):
        key = _key(path)
        if path.root in ("tool", "input", "step") or not path.parts or key in found:
            continue
        if any(key[:n] in guarded for n in range(2, len(key) + 1)):
            continue
        known = BUILTINS.get(key[:2])
        if known is not None and known[1] and len(key) == 2:
            continue
        found.append(key)
    return found


def _fresh(value: Any) -> Any:
    """A copy of JSON-like data (dicts, lists and scalars)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def _may_be_absent(tool: m.Tool, key: Key) -> bool:
    if key[0] != "args":
        return True
    fields = tool.input.fields
    for part in key[1:]:
        f = next((g for g in fields if g.name == part), None)
        if f is None:
            return True
        if f.type.optional and f.default is None:
            return True
        fields = f.type.fields
    return False


class _PolicyAnalyser:
    def __init__(
        self,
        spec: m.Spec,
        policy: m.Policy,
        analysis: PolicyAnalysis,
        cache: AnalysisCache,
        partition: bool = True,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.analysis = analysis
        self.cache = cache
        self.partition = partition
        self.rules = policy.rules
        self.keys: list[RuleKey] = [rule_key(r) for r in self.rules]
        self.index = RuleIndex(self.rules)
        self.scope: dict[int, list[str]] = {i: [] for i in range(len(self.rules))}
        self.witnesses: dict[str, Witness] = analysis.witnesses.setdefault(policy.name, {})
        self.won: set[int] = set()
        self.wins_on: dict[int, set[str]] = {}
        """The tools on whose calls each rule wins somewhere (for its selectors)."""
        self.lost_on: dict[int, dict[str, tuple[m.Tool, list[int], Example]]] = {}
        """A call of a tool each rule matches and loses, by tool (kept, not yet a witness)."""
        self.matchable: dict[int, tuple[str, Witness]] = {}
        self.inexact: set[int] = set()
        self.absent_done: set[tuple[int, Key]] = set()
        self.reads = {i: _reads(r) for i, r in enumerate(self.rules)}
        self.default_example: Witness | None = None
        self.covers: dict[int, set[int]] = {}
        self.scopes: dict[int, frozenset[str]] = {}
        self.judged: dict[int, tuple[bool, int | None, Decision]] = {}
        """Re-judgements by example (`verify`); the examples live as long as the cache."""
        self.equals: dict[int, set[int]] = {}
        self.undecided: dict[int | None, list[Undecided]] = {}
        self.shared: dict[Any, list[int]] = {}
        """What the partitions answered without z3 share (cells.py `solve_simply`)."""

    # =========================================================================================

    def run(self) -> None:
        tools = [self.spec.tools[t] for t in sorted(self.spec.tools)]
        wants_default = self.policy.default is not None and self.policy.default.effect == "allow"
        everything = list(range(len(self.rules)))
        for tool in tools:
            indices = self.index.bucket(tool)
            for i in indices:
                self.scope[i].append(tool.id)
            if not (indices or wants_default):
                continue
            if not self.partition:
                indices = everything
            self.take(tool, indices, self.answers(tool, indices, wants_default))
        self.report_losers()
        self.report_selectors()
        if wants_default:
            self.report_default_allow()
        self.report_undecided()

    def answers(self, tool: m.Tool, indices: list[int], wants_default: bool) -> Answers:
        """The partition's answers: from this run, from the cache, or solved now."""
        rules = [self.rules[i] for i in indices]
        key = partition_key(self.spec, tool, rules, [self.keys[i] for i in indices], wants_default)
        if not self.partition:
            key = f"{tool.id}\n{key}"  # no sharing between tools
        key = f"{budget_key()}\n{key}"  # an answer given up on under one budget is not another's
        found = self.cache.get(key)
        if found is not None:
            return found
        absent = [[k for k in self.reads[i] if _may_be_absent(tool, k)] for i in indices]
        simple = solve_simply(self.spec, tool, rules, absent, wants_default, self.shared)
        if simple is not None:
            self.analysis.decided += simple.decided
            return self.cache.put(key, simple)
        from .solve import solve_partition  # z3: loaded only when a partition must be solved

        solved = solve_partition(self.spec, tool, rules, absent, wants_default, query_rlimit())
        self.analysis.queries += solved.queries
        return self.cache.put(key, solved)

    def take(self, tool: m.Tool, indices: list[int], answers: Answers) -> None:
        """What the partition of `tool` says about each of its rules, in text order."""
        self.inexact |= {indices[p] for p, yes in enumerate(answers.inexact) if yes}
        for p, i in enumerate(indices):
            won, matched = answers.wins[p], answers.matches[p]
            if won is not None:
                self.wins_on.setdefault(i, set()).add(tool.id)
            elif matched is not None:
                self.lost_on.setdefault(i, {}).setdefault(tool.id, (tool, indices, matched))
            if i in self.won:
                continue
            if won is not None:
                self.won.add(i)
                self.witnesses[self.rules[i].label] = self.witness_for(tool, indices, won)
                continue
            if matched is not None and i not in self.matchable:
                self.matchable[i] = (tool.id, self.witness_for(tool, indices, matched))
            if p in answers.covers:
                mine = {indices[q] for q in answers.covers[p]}
                self.covers[i] = self.covers[i] & mine if i in self.covers else mine
                twins = {indices[q] for q in answers.equals.get(p, ())}
                self.equals[i] = self.equals[i] & twins if i in self.equals else twins
        for absent in answers.absent:
            i = indices[absent.position]
            if (i, absent.key) not in self.absent_done:
                self.absent_done.add((i, absent.key))
                self.report_absent(tool, indices, i, absent.key, absent.example)
        if answers.default is not None and self.default_example is None:
            self.default_example = self.witness_for(tool, indices, answers.default)
        for undecided in answers.undecided:
            rule = None if undecided.position is None else indices[undecided.position]
            self.undecided.setdefault(rule, []).append(undecided)

    def witness_for(self, tool: m.Tool, indices: list[int], example: Example) -> Witness:
        """The partition's example as a call to `tool`, decided and re-judged for it."""
        # a fresh copy for each tool: the partition's answers may serve many
        call = Call(**{k: _fresh(v) for k, v in vars(example.call).items()})
        call.tool = tool.id
        if example.winner is None:
            decision = default_decision(self.spec, self.policy, call)
        else:
            rule = self.rules[indices[example.winner]]
            decision = Decision(
                rule.effect,
                rule.label,
                [{"kind": a.kind, "value": a.value} for a in rule.approvers],
                rule.reason,
            )
        witness = Witness(self.policy.name, decision.rule, call, decision)
        self.verify(witness, indices, example)
        return witness

    def verify(self, witness: Witness, indices: list[int], example: Example) -> None:
        """Re-judge the call the plain way; a disagreement makes the witness inexact.

        Only the bucket's rules can match a call to its tool, so only they are re-judged. The
        judgement is the same for every tool that shares the example's partition (it reads
        only what the partition's key holds), so it is made once per example: the position of
        the rule that decides the call, and its effect.
        """
        judged = self.judged.get(id(example))
        if judged is None:
            rules = tuple(self.rules[i] for i in indices)
            policy = self.policy.model_copy(update={"rules": rules})
            actual = decide(self.spec, policy, witness.call)
            position = next((p for p, rule in enumerate(rules) if rule.label == actual.rule), None)
            judged = self.judged[id(example)] = (actual == witness.decision, position, actual)
        agrees, position, actual = judged
        if not agrees:
            rule = self.rules[indices[position]].label if position is not None else None
            witness.exact = False
            witness.notes.append(
                f"re-judged, the call is decided `{actual.effect}` by `{rule or 'the default'}`"
            )
        problems = schema_problems(self.spec, witness.call)
        if problems:
            witness.exact = False
            witness.notes.extend(problems)

    # --- absent values ------------------------------------------------------------------------

    def report_absent(
        self, tool: m.Tool, indices: list[int], i: int, key: Key, found: Example
    ) -> None:
        rule = self.rules[i]
        example = self.witness_for(tool, indices, found)
        what = _key_text(key)
        effect = rule.effect
        self.add(
            "absent-value",
            rule,
            None,
            f"`{rule.label}` reads `{what}` without a `has` guard, so the {effect} does not "
            f"apply when `{what}` is absent",
            example,
            exact=i not in self.inexact and example.exact,
        )

    # --- default allow ------------------------------------------------------------------------

    def report_default_allow(self) -> None:
        default = self.policy.default
        self.analysis.findings.append(
            Finding(
                "default-allow",
                self.policy.name,
                None,
                None,
                f"policy `{self.policy.name}` allows every call that no rule matches",
                self.default_example,
                default.origin if default is not None else self.policy.origin,
            )
        )

    # --- rules that never win -------------------------------------------------------------------

    def report_losers(self) -> None:
        for i, rule in enumerate(self.rules):
            if i in self.won or not self.scope[i]:
                continue
            if any(u.what in ("win", "match") for u in self.undecided.get(i, ())):
                continue  # not known to lose: reported as undecided
            exact = i not in self.inexact
            if i not in self.matchable:
                self.add(
                    "unsatisfiable",
                    rule,
                    None,
                    f"rule `{rule.label}` matches no call: its condition can never hold",
                    None,
                    exact=exact,
                )
                continue
            _, example = self.matchable[i]
            twin = self.same_calls(i)
            if twin is not None:
                other = self.rules[twin]
                self.add(
                    "opposite-effects",
                    rule,
                    other,
                    f"rules `{other.label}` and `{rule.label}` match the same calls with "
                    f"opposite effects (`{other.effect}` and `{rule.effect}`)",
                    example,
                    exact=exact and twin not in self.inexact,
                )
                continue
            beater = self.single_beater(i)
            if beater is not None:
                other = self.rules[beater]
                why = (
                    f"the earlier `{other.effect}` rule `{other.label}`"
                    if other.effect == rule.effect
                    else f"the `{other.effect}` rule `{other.label}`"
                )
                message = f"rule `{rule.label}` can never win: {why} matches every call it matches"
            else:
                message = (
                    f"rule `{rule.label}` can never win: stronger or earlier rules decide every "
                    "call it matches"
                )
            self.add(
                "never-wins",
                rule,
                self.rules[beater] if beater is not None else None,
                message,
                example,
                exact=exact,
            )

    def report_selectors(self) -> None:
        """A selector of a rule that wins elsewhere, under which it never wins: every call of
        the tools it selects that the rule matches is decided by other rules (an `allow` of
        MCP tools under an `ask` of every MCP call). Only exact, decided claims."""
        for i, rule in enumerate(self.rules):
            if len(rule.selectors) < 2 or i not in self.won or i in self.inexact:
                continue
            if self.undecided.get(i):
                continue
            wins = self.wins_on.get(i, set())
            lost = self.lost_on.get(i, {})
            for position, selector in enumerate(rule.selectors):
                tools = [t for t in self.scope[i] if selects(selector, self.spec.tools[t])]
                if not tools or wins.intersection(tools):
                    continue
                seen = next((lost[t] for t in tools if t in lost), None)
                example = self.witness_for(*seen) if seen is not None else None
                text = selector.text or selector.value or selector.kind
                named = ", ".join(f"`{t}`" for t in tools[:3]) + (", …" if len(tools) > 3 else "")
                self.analysis.findings.append(
                    Finding(
                        "selector-never-wins",
                        self.policy.name,
                        rule.label,
                        None,
                        f"`{text}` in rule `{rule.label}` never decides a call: other rules "
                        f"decide every call of {named} it matches",
                        example,
                        rule.origin,
                        example is None or example.exact,
                        position,
                    )
                )

    def beats(self, j: int, i: int) -> bool:
        """Whether `j` can beat `i` wherever `i` can match: a stronger effect, or the same one
        earlier, and every tool `i` selects selected by `j` too."""
        mine, other = self.rules[i], self.rules[j]
        stronger = STRENGTH[other.effect] > STRENGTH[mine.effect]
        if not (stronger or (other.effect == mine.effect and j < i)):
            return False
        return self.scope_set(i) <= self.scope_set(j)

    def scope_set(self, i: int) -> frozenset[str]:
        found = self.scopes.get(i)
        if found is None:
            found = self.scopes[i] = frozenset(self.scope[i])
        return found

    def single_beater(self, i: int) -> int | None:
        """A rule that by itself beats `i` on every call `i` matches (in every partition)."""
        return next((j for j in sorted(self.covers.get(i, ())) if self.beats(j, i)), None)

    def same_calls(self, i: int) -> int | None:
        """A rule with another effect that matches exactly the calls `i` matches."""
        return next(
            (
                j
                for j in sorted(self.equals.get(i, ()))
                if self.rules[j].effect != self.rules[i].effect
                and self.beats(j, i)
                and self.scope_set(j) == self.scope_set(i)
            ),
            None,
        )

    # --- questions not decided ------------------------------------------------------------------

    def report_undecided(self) -> None:
        for i, asked in self.undecided.items():
            # a rule that wins a call somewhere neither loses nor needs a beater
            settled = i in self.won
            found = [u for u in asked if not (settled and u.what != "absent")]
            if not found:
                continue
            first = min(found, key=lambda u: list(_QUESTIONS).index(u.what))
            # the same words on every machine: a budget of resource units, not of time
            spent = all(u.out_of_budget for u in found)
            did_not = "did not decide within its budget" if spent else "could not decide"
            why = "" if spent else f" (z3: {first.reason or 'unknown'})"
            if i is None:
                default = self.policy.default
                self.analysis.findings.append(
                    Finding(
                        "undecided",
                        self.policy.name,
                        None,
                        None,
                        f"the analysis {did_not} whether a call to policy `{self.policy.name}` "
                        f"falls to its default{why}",
                        None,
                        default.origin if default is not None else self.policy.origin,
                        exact=False,
                    )
                )
                continue
            rule = self.rules[i]
            self.add(
                "undecided",
                rule,
                None,
                f"the analysis {did_not} whether rule `{rule.label}` {_QUESTIONS[first.what]}{why}",
                None,
                exact=False,
            )

    def add(
        self,
        kind: str,
        rule: m.Rule,
        other: m.Rule | None,
        message: str,
        example: Witness | None,
        exact: bool = True,
    ) -> None:
        self.analysis.findings.append(
            Finding(
                kind,
                self.policy.name,
                rule.label,
                other.label if other is not None else None,
                message,
                example,
                rule.origin,
                exact,
            )
        )


_QUESTIONS = {
    "win": "can decide a call",
    "match": "matches any call",
    "absent": "fails open when a value it reads is absent",
    "beaten": "is beaten by one rule alone",
    "twin": "matches the same calls as a rule with another effect",
    "default": "",
}
"""How a finding names each question of solve.py, the weightiest first."""
