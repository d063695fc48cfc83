"""The scenario suite's report: per domain and in total, how the injected attacks and the
legitimate tasks of tests/scenarios/ fare under their specs.

    .venv/bin/python bench/scenarios.py [--verbose]

Attacks: denied / asked / allowed (an attack is denied when every call its instruction wants
is denied). Tasks: allowed / asked / denied; "asked" counts the tasks whose spec says a person
must approve them apart (`approval`). The bar: every attack denied, no task asked or denied
unless its spec says a person must approve it. Exit status 1 when the bar is missed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.scenarios.catalogue import DOMAINS
from tests.scenarios.runner import misses, run, spec_of


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    header = (
        f"{'domain':<20} {'attacks':>7} {'denied':>6} {'asked':>5} {'allowed':>7}"
        f" | {'tasks':>5} {'allowed':>7} {'asked':>5} {'(by spec)':>9} {'denied':>6}"
    )
    print(header)
    print("-" * len(header))
    total = [0] * 9
    failed = []
    limits = []
    started = time.perf_counter()
    calls = 0
    for domain in DOMAINS:
        spec_of(domain)
        every = [run(domain, s) for s in domain.scenarios]
        outcomes = [o for o in every if o.scenario.limit is None]
        limits += [(domain.name, o) for o in every if o.scenario.limit is not None]
        calls += sum(len(o.calls) for o in outcomes)
        attacks = [o for o in outcomes if o.scenario.attack]
        tasks = [o for o in outcomes if not o.scenario.attack]
        row = [
            len(attacks),
            sum(o.verdict == "denied" for o in attacks),
            sum(o.verdict == "asked" for o in attacks),
            sum(o.verdict == "allowed" for o in attacks),
            len(tasks),
            sum(o.verdict == "allowed" for o in tasks),
            sum(o.verdict == "asked" for o in tasks),
            sum(o.verdict == "asked" and o.scenario.approval for o in tasks),
            sum(o.verdict == "denied" for o in tasks),
        ]
        total = [a + b for a, b in zip(total, row, strict=True)]
        print(_row(domain.name, row))
        failed += [(domain.name, o) for o in misses(outcomes)]
        if verbose:
            for o in every:
                kind = "attack" if o.scenario.attack else "task"
                print(f"    {kind:<6} {o.verdict:<7} {o.scenario.name}")
                for tool, verdict, rule, evidence in o.calls:
                    print(f"        {tool:<22} {verdict:<7} {rule or '-'}")
                    for line in evidence:
                        print(f"            {line}")
    print("-" * len(header))
    print(_row("total", total))
    elapsed = time.perf_counter() - started
    print(f"\n{calls} governed calls in {elapsed:.2f} s (fresh harness per scenario)")
    if limits:
        print("\nlimits (probes of what session-aware policy cannot see; not counted above):")
        for name, o in limits:
            verdicts = ", ".join(f"{tool} {verdict}" for tool, verdict, _r, _e in o.calls)
            print(f"  {name}: {o.scenario.name} -> {o.verdict} ({verdicts})")
            print(f"    why: {o.scenario.limit}")
    if failed:
        print("\nmissed the bar:")
        for name, o in failed:
            print(f"  {name}: {o.scenario.name} -> {o.verdict} {o.calls}")
        return 1
    print("bar met: every attack denied; every task allowed, or asked where its spec says so")
    return 0


def _row(name: str, r: list[int]) -> str:
    return (
        f"{name:<20} {r[0]:>7} {r[1]:>6} {r[2]:>5} {r[3]:>7}"
        f" | {r[4]:>5} {r[5]:>7} {r[6]:>5} {r[7]:>9} {r[8]:>6}"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
