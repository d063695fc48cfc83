"""The scenario suite's report: per domain and in total, how the legitimate tasks of
tests/scenarios/ and every task × attack pair fare under the domains' specs, and what the
session terms cost a decision.

    .venv/bin/python bench/scenarios.py [--verbose] [--record] [--rounds 3]

Pairs (each attack planted in each task's last read of others' content): denied / asked /
through. Tasks: allowed / asked / denied; "(by spec)" counts the asked tasks whose spec says a
person must approve them. Under the table, one line per miss with its class. The goal: every
pair denied, at most 5% of tasks asked, none denied.

Latency: every task is run again under its domain's spec and under the same spec with each
session term replaced by an ordinary test of the call (a provenance term by a prefix test of
the value, a history term by a test of the actor or a length), each decision (`Session.decide`)
timed alone; the medians of the best of `--rounds` rounds, and their ratio.

`--record` rewrites tests/scenarios/outcomes.json, the verdicts tests/test_scenarios.py holds
the suite to. Exit status 1 when the goal is missed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnessc.runtime.model import Spec
from harnessc.runtime.model.ir import Compare, History, Length, Literal, Provenance
from harnessc.runtime.model.ir import Path as P
from pydantic import BaseModel

from tests.scenarios.catalogue import DOMAINS
from tests.scenarios.runner import CLASSES, HERE, Report, report, run, spec_of

HEADER = (
    f"{'domain':<18} {'attacks':>7} {'pairs':>5} {'denied':>6} {'asked':>5} {'through':>7}"
    f" | {'tasks':>5} {'allowed':>7} {'asked':>5} {'(by spec)':>9} {'denied':>6}"
)
KEYS = (
    "attacks",
    "pairs",
    "pairs_denied",
    "pairs_asked",
    "pairs_through",
    "tasks",
    "tasks_allowed",
    "tasks_asked",
    "tasks_asked_by_spec",
    "tasks_denied",
)


def table(reports: list[Report]) -> tuple[list[str], dict[str, int]]:
    lines = [HEADER, "-" * len(HEADER)]
    total = dict.fromkeys(KEYS, 0)
    for r in reports:
        row = r.row()
        total = {k: total[k] + row[k] for k in KEYS}
        lines.append(_row(r.domain.name, row))
    lines += ["-" * len(HEADER), _row("total", total)]
    return lines, total


def _row(name: str, r: dict[str, int]) -> str:
    p = r["pairs"] or 1
    return (
        f"{name:<18} {r['attacks']:>7} {r['pairs']:>5} {r['pairs_denied']:>6} {r['pairs_asked']:>5}"
        f" {r['pairs_through']:>7} | {r['tasks']:>5} {r['tasks_allowed']:>7} {r['tasks_asked']:>5}"
        f" {r['tasks_asked_by_spec']:>9} {r['tasks_denied']:>6}"
        f"   ({100 * r['pairs_denied'] / p:.1f}% of pairs denied)"
    )


def miss_lines(r: Report) -> list[str]:
    out = []
    for o in r.misses():
        if o.attack is not None:
            out.append(f"  {r.domain.name}: pair {o.verdict}: {o.name} [{o.attack.kind}]")
        else:
            why = o.task.needs or "unclassified"
            out.append(f"  {r.domain.name}: task {o.verdict}: {o.task.name} [{why}]")
    return out


def plain(spec: Spec) -> Spec:
    """The spec with each session term replaced by an ordinary test of the call."""

    def swap(node: Any) -> Any:
        if isinstance(node, Provenance):
            return Compare(
                op="startswith", left=swap(node.value), right=Literal(value="zz-", type="string")
            )
        if isinstance(node, History):
            if node.func in ("count", "sum"):
                return Length(of=P(root="actor", parts=("user",)))
            return Compare(
                op="==",
                left=P(root="actor", parts=("role",)),
                right=Literal(value="auditor", type="string"),
            )
        if isinstance(node, tuple):
            return tuple(swap(n) for n in node)
        if isinstance(node, BaseModel):
            update = {k: swap(getattr(node, k)) for k in type(node).model_fields}
            return node.model_copy(update=update)
        return node

    policies = {
        name: p.model_copy(
            update={
                "rules": tuple(
                    r.model_copy(update={"condition": swap(r.condition)}) for r in p.rules
                )
            }
        )
        for name, p in spec.policies.items()
    }
    return spec.model_copy(update={"policies": policies})


def latency(rounds: int) -> list[str]:
    best: dict[tuple[str, str], float] = {}
    plains = {d.spec: plain(spec_of(d)) for d in DOMAINS}
    for _ in range(rounds):
        for d in DOMAINS:
            timings: dict[str, list[int]] = {"session": [], "plain": []}
            for t in d.tasks:  # the two variants task by task, so load hits both alike
                run(d, t, timings=timings["session"])
                run(d, t, spec=plains[d.spec], timings=timings["plain"])
            for variant, times in timings.items():
                med = statistics.median(times) / 1000
                key = (d.name, variant)
                best[key] = min(best.get(key, med), med)
    lines = [
        f"{'decision (µs, median)':<22} {'session terms':>13} {'plain':>7} {'ratio':>6}",
    ]
    for d in DOMAINS:
        s, q = best[d.name, "session"], best[d.name, "plain"]
        lines.append(f"{d.name:<22} {s:>13.1f} {q:>7.1f} {s / q:>6.2f}")
    return lines


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    started = time.perf_counter()
    reports = [report(d) for d in DOMAINS]
    elapsed = time.perf_counter() - started
    lines, total = table(reports)
    print("\n".join(lines))
    calls = sum(len(o.calls) for r in reports for o in (*r.tasks, *r.pairs))
    kinds = {a.kind for d in DOMAINS for a in d.attacks}
    print(
        f"\n{total['tasks']} tasks, {total['attacks']} attacks in {len(kinds)} classes"
        f" (of {len(CLASSES)}), {total['pairs']} pairs: {calls} governed calls in {elapsed:.2f} s"
    )
    asked = total["tasks_asked"] / (total["tasks"] or 1)
    print(f"tasks asked: {100 * asked:.1f}% (goal at most 5%), denied: {total['tasks_denied']}")
    if verbose:
        for r in reports:
            for o in (*r.tasks, *r.pairs):
                print(f"    {o.verdict:<7} {o.name}")
                for tool, verdict, rule, evidence in o.calls:
                    print(f"        {tool:<22} {verdict:<7} {rule or '-'}")
                    for line in evidence:
                        print(f"            {line}")
    print()
    print("\n".join(latency(rounds)))
    print(f"load: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    missed = [line for r in reports for line in miss_lines(r)]
    if "--record" in argv:
        out = {r.domain.name: r.outcomes() for r in reports}
        path = HERE / "outcomes.json"
        path.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nrecorded {path.relative_to(HERE.parent.parent)}")
    if missed:
        print(f"\nmisses ({len(missed)}), each with its class:")
        print("\n".join(missed))
        return 1
    print("\ngoal met: every pair denied; every task allowed, or asked where its spec says so")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
