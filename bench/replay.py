"""Replay speed: recorded decisions read, and decided again, per second.

    .venv/bin/python bench/replay.py [--decisions 200000] [--log PATH] [--rebuild] [--rounds 2]

Builds (once, then reuses) a SQLite log of real harness sessions: sessions of 5 to 40 calls
by engineers, operators and guests over eight tools (reads, writes, external calls, a secret
argument), with user messages, changed facts, approvals and refusals, so the log holds about
six events per decision. Then prints, for the best of `rounds` runs, decisions per second of:

- `read`: the recorded decisions streamed with their contexts (`read_decisions`);
- `same spec`: read and decided again under the spec that made them (`replay`; nothing flips);
- `changed spec`: under a spec with three rules changed (some decisions flip);
- `changed, 2 workers`: the same in two processes, each deciding its share of the sessions
  (`replay(path, spec, workers=2)`; its CPU seconds are both workers');
- `session spec`: under a spec whose policy also reads session state (a provenance term and a
  windowed count: the family's ledger is fed the log as it is read).
- `chain walk`: the log's whole chain verified (`ChainWatch`), which `harnessc replay` does
  before it replays; per decision of the log, so it adds to a replay as the rows compare.

with the load average before and after. Each figure is given per wall-clock second and per
CPU second of the process (on a shared machine the second is what one idle core would give;
compare figures of one run). A log of more than 20,000 decisions repeats the sessions of the
first 20,000 as other sessions (ids renamed); it is built once and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from harnessc.runtime.log.chain import ChainWatch
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.session.recorded import read_decisions
from harnessc.runtime.session.replay import replay

SPEC = """\
harness rb { version "1.0.0" }
fact release.freeze: bool
tool repo.read { summary "Read a file."; effects read; input { path: string } }
tool repo.search { summary "Search."; effects read; input { query: string, limit: int? } }
tool change.create {
  summary "Open a change request."
  effects write reversible
  risk medium
  input { service: string, patch: string }
}
tool change.comment { summary "Comment."; effects write; input { change_id: string, text: string } }
tool deploy.run {
  summary "Deploy."
  effects external
  risk high
  input { service: string, environment: string }
}
tool ops.restart { summary "Restart."; effects external; risk medium; input { service: string } }
tool mail.send { summary "Send mail."; effects external; input { to: string, body: string } }
tool vault.put { summary "Store."; effects write; input { name: string, value: string secret } }
surface tools { expose repo.*, change.*, deploy.*, ops.*, mail.*, vault.* }
policy main {
  default deny
  allow repo.read, repo.search, change.comment, vault.put
  allow change.create when actor.role != "guest"
  guests: deny change.*, ops.*, deploy.* when actor.role == "guest" { reason "guests read only" }
  prod: ask deploy.run when args.environment == "production" {
    approver role "release-manager"
    grant once ttl 10m
  }
  allow deploy.run when args.environment != "production"
  frozen: deny deploy.run when release.freeze == true { reason "release freeze" }
  restart: ask ops.restart { approver role "ops"; grant once ttl 10m; self_approval allow }
  outside: ask mail.send when not (args.to endswith "@corp.example") { approver role "ops" }
  allow mail.send
}
agent runner { surface tools; policy main }
"""

CHANGED = (
    SPEC.replace(  # staging deploys now ask; restarts are allowed; mail outside is denied
        'allow deploy.run when args.environment != "production"',
        'ask deploy.run when args.environment == "staging" { approver role "ops" }\n'
        '  allow deploy.run when args.environment == "dev"',
    )
    .replace(
        'restart: ask ops.restart { approver role "ops"; grant once ttl 10m; self_approval allow }',
        "allow ops.restart",
    )
    .replace("outside: ask mail.send", "outside: deny mail.send")
    .replace('"@corp.example") { approver role "ops" }', '"@corp.example") { reason "no" }')
)

SESSION = SPEC.replace(
    "  allow mail.send\n",
    "  allow mail.send\n"
    '  injected: deny change.create when args.patch from untrusted only { reason "injected" }\n'
    '  burst: ask ops.restart when count(ops.restart within 10m) > 50 { approver role "ops" }\n',
)

ROLES = ("engineer", "engineer", "engineer", "ops", "guest")
SERVICES = ("api", "billing", "search", "auth", "web")
ENVIRONMENTS = ("dev", "staging", "production")
MAILS = ("a@corp.example", "b@corp.example", "x@vendor.example")


def compiled(text: str) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rb.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
        assert result.ok, [d.message for d in result.diagnostics]
        return result.model


def call_of(rng: random.Random, i: int) -> tuple[str, dict[str, Any]]:
    pick = rng.random()
    service = rng.choice(SERVICES)
    if pick < 0.30:
        return "repo.read", {"path": f"/repo/src/{service}/f{i % 97}.py"}
    if pick < 0.42:
        return "repo.search", {"query": f"{service} timeout", "limit": 10}
    if pick < 0.55:
        return "change.create", {"service": service, "patch": f"artifacts/p{i % 13}.patch"}
    if pick < 0.62:
        return "change.comment", {"change_id": f"chg-{i % 500}", "text": "looks good"}
    if pick < 0.75:
        return "deploy.run", {"service": service, "environment": rng.choice(ENVIRONMENTS)}
    if pick < 0.85:
        return "ops.restart", {"service": service}
    if pick < 0.95:
        return "mail.send", {"to": rng.choice(MAILS), "body": f"status of {service}"}
    return "vault.put", {"name": f"{service}-token", "value": f"s3cr3t-{i:08}"}


BASE = 20_000
"""Decisions made by real sessions; a larger log repeats them as other sessions (`copies`)."""
_IDS = re.compile(r"\b(ses|dec|act|apr|grt)-([0-9a-f]{4})([0-9a-f]{12})\b")


def build_log(path: Path, decisions: int) -> None:
    spec = compiled(SPEC)
    store = SQLiteStore(path, synchronous="NORMAL")
    h = Harness(spec, store=store)
    for tool in spec.tools:
        h.bind(tool, lambda args: {})
    rng = random.Random(17)
    made, n = 0, 0
    while made < min(decisions, BASE):
        role = rng.choice(ROLES)
        s = h.session(
            "runner",
            actor={"user": f"u-{rng.randrange(40)}", "role": role},
            task=f"t-{n}",
            facts={"release.freeze": rng.random() < 0.1},
        )
        s.user_said("please look at api and deploy when ready")
        for _ in range(rng.randrange(5, 41)):
            n += 1
            tool, args = call_of(rng, n)
            call = s.normalize(tool, f"c-{n}", args)
            if not isinstance(call, PendingCall):
                continue
            decision = s.decide(call)
            made += 1
            if decision.effect == "allow":
                s.invoke(call)
            elif decision.effect == "ask" and rng.random() < 0.3:
                approver = {"user": "u-ops", "roles": ["ops", "release-manager"]}
                h.approve(s.request_approval(call).request_id, by=approver)
                made += 1
                s.invoke(call)
            if rng.random() < 0.02:
                s.update_facts({"release.freeze": rng.random() < 0.5})
        s.end()
    copies(store, made, decisions)
    store.close()


def copies(store: SQLiteStore, made: int, decisions: int) -> None:
    """Repeat the sessions of the log as other sessions (their ids, and those of their
    decisions, actions, requests and grants, renamed) until it holds `decisions`."""
    base = [e for e in store.read() if e.stream != "harness"]
    copy = 0
    while made < decisions:
        copy += 1
        batch: list[NewEvent] = []
        for e in base:
            if made >= decisions and e.type == "session.started":
                break
            text = _IDS.sub(lambda m, c=copy: f"{m[1]}-{c:04x}{m[3]}", e.payload_json)
            stream = _IDS.sub(lambda m, c=copy: f"{m[1]}-{c:04x}{m[3]}", e.stream)
            batch.append(NewEvent(stream, e.kind, e.type, json.loads(text), text))
            made += e.type == "decision"
            if len(batch) >= 5000:
                store.append_many(batch)
                batch = []
        if batch:
            store.append_many(batch)


def timed(fn: Any) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (this process and the workers it waited for), and what `fn`
    counted."""
    start, cpu = time.perf_counter(), _cpu()
    count = fn()
    return time.perf_counter() - start, _cpu() - cpu, count


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=200_000)
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    log = args.log or Path(tempfile.gettempdir()) / f"harnessc-bench-replay-{args.decisions}.db"
    if args.rebuild and log.exists():
        log.unlink()
    if not log.exists():
        start = time.perf_counter()
        build_log(log, args.decisions)
        print(f"built {log} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    load = os.getloadavg()
    specs = {"same": compiled(SPEC), "changed": compiled(CHANGED), "session": compiled(SESSION)}
    store = SQLiteStore(log, readonly=True)
    events = store.head()[0]

    def read() -> int:
        return sum(1 for _ in read_decisions(store, specs["same"]))

    def run(name: str, workers: int = 1) -> Any:
        def go() -> int:
            target = str(log) if workers > 1 else store
            report = replay(target, specs[name], workers=workers)
            go.report = report  # type: ignore[attr-defined]
            return report.decisions

        return go

    cases = {"read": read, "same spec": run("same"), "changed spec": run("changed")}
    cases["changed, 2 workers"] = run("changed", workers=2)
    cases["session spec"] = run("session")
    decisions = read()

    def walk() -> int:
        assert ChainWatch(store.log_key).check(store).ok
        return decisions

    cases["chain walk"] = walk
    print(f"log: {log.name}, {events} events, load average {load[0]:.2f} {load[1]:.2f}")
    print(f"{'':18} {'per second':>12} {'per CPU second':>15}")
    for name, fn in cases.items():
        best: tuple[float, float, int] | None = None
        for _ in range(args.rounds):
            took = timed(fn)
            if best is None or took[1] < best[1]:
                best = took
        assert best is not None
        seconds, cpu, count = best
        extra = ""
        report = getattr(fn, "report", None)
        if report is not None:
            extra = (
                f"  flipped {report.flipped}, widened {report.widened}, "
                f"not replayed {report.skipped}"
            )
        print(
            f"{name:13} {count / seconds:12,.0f} {count / cpu:15,.0f}  ({count} decisions){extra}"
        )
    after = os.getloadavg()
    print(f"load average after: {after[0]:.2f} {after[1]:.2f}")


if __name__ == "__main__":
    main()
