"""At most once across processes, under kills: worker processes share sessions on one log
(SQLite, or PostgreSQL), each working through the same calls (an allowed read and a payment
under `grant once`, approved by the worker that finds it waiting), while the parent SIGKILLs a
random worker every few executions and starts another. Every executor appends a line to a side
file (O_APPEND: a killed process's line survives), so the file counts the executions of every
process. At the end a harness whose clock is a day ahead takes every session up, which records
each RUNNING call of a killed worker UNKNOWN (its lease ended), and the figures are checked:
no action and no call executed twice, every call's outcome recorded or UNKNOWN.

    .venv/bin/python bench/at_most_once.py [--calls 1000] [--kills 50] [--workers 4]
        [--sessions 20] [--postgres URL] [--only sqlite|postgres]

Prints, per store: calls, kills, the executions-per-action histogram, the outcomes, the
UNKNOWN count and the wall time. tests/test_at_most_once.py runs `run` at a smaller size.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SPEC = """
harness k { version "1.0.0" }
tool note.read { summary "Read a note."; effects read; timeout 2s; input { n: int } }
tool pay.send {
  summary "Send a payment."
  effects write external
  risk high
  timeout 2s
  input { to: string, cents: int }
}
policy p {
  default deny
  reads: allow note.read
  pay: ask pay.send {
    approver role "ops"
    grant once ttl 10m
    reason "Each payment is approved."
  }
}
surface s { expose note.*, pay.* }
agent a { surface s; policy p }
"""

OPS = {"user": "u-ops", "role": "ops"}
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")
"""The states that record a call's outcome (UNKNOWN: it may or may not have happened)."""


def open_store(url: str) -> Any:
    from harnessc.runtime import SQLiteStore

    if url.startswith("postgresql:"):
        from harnessc.runtime.log.postgres import PostgresStore

        return PostgresStore(url)
    return SQLiteStore(url)


def ended(store: Any) -> dict[tuple[str, str], str]:
    """The outcome recorded of each call, by (session, tool_call_id): the state of the action
    that ran it (two workers may have requested it at once, and the one that did not run
    is cancelled), or of its last action; only the states that end a call."""
    state: dict[str, str] = {}
    ran: set[str] = set()
    of: dict[tuple[str, str], list[str]] = {}
    for e in store.read():
        if e.type == "action.transition":
            action = e.payload["action_id"]
            state[action] = e.payload["to"]
            ran.update([action] if e.payload["to"] == "RUNNING" else [])
            actions = of.setdefault((e.stream, e.payload["tool_call_id"]), [])
            if action not in actions:
                actions.append(action)
    out = {}
    for call, actions in of.items():
        chosen = next((a for a in actions if a in ran), actions[-1])
        if state[chosen] in ENDED:
            out[call] = state[chosen]
    return out


# -- the worker -----------------------------------------------------------------------------


def worker(spec_path: str, url: str, runs_path: str, plan_path: str, seed: int) -> None:
    """Work through the plan's calls until every one has its outcome recorded: resume the
    session, normalize, decide, approve a payment found waiting, invoke."""
    from harnessc.runtime import Harness, PendingCall, Spec
    from harnessc.runtime.session.approvals import ApprovalError

    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    h = Harness(Spec.from_json(Path(spec_path).read_bytes()), store=open_store(url))
    h.lease_grace_ms = 0  # the lease is the tool's timeout (2 s): a killed run is UNKNOWN soon
    fd = os.open(runs_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def execute(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        line = f"{ctx.action_id} {ctx.session_id} {ctx.pending.tool_call_id} {os.getpid()}\n"
        os.write(fd, line.encode())
        time.sleep(random.uniform(0, 0.02))  # a window for a kill between running and recorded
        return {"ok": True}

    h.bind("note.read", execute)
    h.bind("pay.send", execute)
    rng = random.Random(seed)
    calls = [tuple(c) for c in plan["calls"]]
    while True:
        done = ended(h.store)
        todo = [c for c in calls if (c[0], c[2]) not in done]
        if not todo:
            return
        rng.shuffle(todo)
        for session_id, tool, call_id, args in todo[:8]:
            s = h.resume(session_id)
            pending = s.normalize(tool, call_id, args)
            if not isinstance(pending, PendingCall):
                raise SystemExit(f"refused: {pending}")
            if s.decide(pending).effect == "ask":
                try:
                    request = s.request_approval(pending)
                    if request.status == "pending":
                        h.approve(request.request_id, by=OPS)
                        s.decide(pending)
                except (ApprovalError, ValueError):
                    pass  # answered, or run, by another worker meanwhile: the next pass sees it
            result = s.invoke(pending)
            if not result.ran and result.error_category == "ran_elsewhere":
                time.sleep(0.05)  # running elsewhere: its outcome (or its lease's end) comes


# -- the parent -----------------------------------------------------------------------------


@dataclass
class Figures:
    store: str
    calls: int
    kills: int
    executions: int
    per_action: dict[int, int]
    """How many actions were executed n times, by n."""
    per_call: dict[int, int]
    outcomes: dict[str, int]
    unknown: int
    wall_s: float
    workers_started: int
    problems: list[str] = field(default_factory=list)


def run(
    url: str,
    folder: Path,
    *,
    calls: int,
    kills: int,
    workers: int = 4,
    sessions: int = 10,
    seed: int = 1,
    ceiling_s: float = 600.0,
) -> Figures:
    """Run the kill test on the log at `url` (a SQLite path, or a PostgreSQL URL whose
    database is fresh) and return its figures; `problems` lists every broken promise."""
    from harnessc.compiler.pipeline import check
    from harnessc.runtime import Harness

    rng = random.Random(seed)
    source = folder / "k.harness"
    source.write_text(SPEC, encoding="utf-8")
    checked = check([source])
    assert checked.ok and checked.model is not None
    spec_path = folder / "spec.json"
    spec_path.write_text(checked.model.to_json(), encoding="utf-8")
    runs_path = folder / "runs.txt"
    runs_path.write_text("", encoding="utf-8")

    opening = Harness(checked.model, store=open_store(url))
    ids = [
        opening.session("a", actor={"user": f"u-{i}", "role": "dev"}, task=f"t-{i}").id
        for i in range(sessions)
    ]
    opening.store.close()
    plan = [
        (ids[i % sessions], "pay.send", f"call-{i}", {"to": f"acct-{i}", "cents": 100 + i})
        if i % 2
        else (ids[i % sessions], "note.read", f"call-{i}", {"n": i})
        for i in range(calls)
    ]
    plan_path = folder / "plan.json"
    plan_path.write_text(json.dumps({"calls": plan}), encoding="utf-8")

    started = 0
    numbers: dict[int, int] = {}  # a worker's pid → its number (its stderr file)

    def spawn() -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        with open(folder / f"worker-{started}.err", "wb") as err:
            process = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "worker",
                    str(spec_path),
                    url,
                    str(runs_path),
                    str(plan_path),
                    str(seed * 1000 + started),
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        numbers[process.pid] = started
        return process

    t0 = time.monotonic()
    alive = [spawn() for _ in range(workers)]
    finished: list[subprocess.Popen[bytes]] = []
    killed = 0
    step = max(1, calls // (kills + 3))  # executions between kills: every kill lands mid-run
    mark = 0
    while alive:
        if time.monotonic() - t0 > ceiling_s:
            for p in alive:
                p.kill()
            for p in alive:
                p.wait()  # reaped here: no worker outlives the run, whatever it raises
            raise TimeoutError(f"the workers did not finish within {ceiling_s} s")
        for p in list(alive):
            if p.poll() is not None:
                alive.remove(p)
                finished.append(p)
        executed = runs_path.read_bytes().count(b"\n")
        if killed < kills and alive and executed >= mark + step:
            # half the time the worker that executed last: it may be inside its executor
            lines = runs_path.read_text(encoding="utf-8").splitlines()
            last_pid = int(lines[-1].split()[3]) if lines else -1
            busy = [p for p in alive if p.pid == last_pid]
            victim = busy[0] if busy and rng.random() < 0.5 else rng.choice(alive)
            victim.kill()  # SIGKILL
            victim.wait()
            alive.remove(victim)
            killed += 1
            mark = executed
            alive.append(spawn())
        time.sleep(0.01)
    wall = time.monotonic() - t0
    problems = [
        f"a worker exited {p.returncode}: "
        + (folder / f"worker-{numbers[p.pid]}.err").read_text(encoding="utf-8")[-2000:]
        for p in finished
        if p.returncode != 0
    ]

    # a day later: every lease has ended; resuming each session records the dead runs UNKNOWN
    late = datetime.now(UTC) + timedelta(days=1)
    final = Harness(checked.model, store=open_store(url), clock=lambda: late)
    for session_id in ids:
        final.resume(session_id)
    outcomes = ended(final.store)
    executions = [line.split() for line in runs_path.read_text(encoding="utf-8").splitlines()]
    per_action = collections.Counter(collections.Counter(e[0] for e in executions).values())
    per_call = collections.Counter(collections.Counter((e[1], e[2]) for e in executions).values())
    running = collections.Counter(
        e.payload["action_id"]
        for e in final.store.read()
        if e.type == "action.transition" and e.payload["to"] == "RUNNING"
    )
    final.store.close()
    if set(per_action) - {1}:
        problems.append(f"an action executed more than once: {dict(per_action)}")
    if set(per_call) - {1}:
        problems.append(f"a call executed more than once: {dict(per_call)}")
    if any(n > 1 for n in running.values()):
        problems.append("the log records a second RUNNING of an action")
    unrecorded = {e[0] for e in executions} - set(running)
    if unrecorded:
        problems.append(f"executed without a recorded RUNNING: {sorted(unrecorded)[:5]}")
    missing = [c for c in plan if (c[0], c[2]) not in outcomes]
    if missing:
        problems.append(f"{len(missing)} calls have no outcome recorded, e.g. {missing[:3]}")
    if killed < kills:
        problems.append(f"only {killed} kills of {kills}: the run ended first")
    return Figures(
        store="postgresql" if url.startswith("postgresql:") else "sqlite",
        calls=calls,
        kills=killed,
        executions=len(executions),
        per_action=dict(sorted(per_action.items())),
        per_call=dict(sorted(per_call.items())),
        outcomes=dict(sorted(collections.Counter(outcomes.values()).items())),
        unknown=sum(1 for v in outcomes.values() if v == "UNKNOWN"),
        wall_s=wall,
        workers_started=started,
        problems=problems,
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:6], int(sys.argv[6]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL"))
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pgdb import fresh_database

    failed = False
    for kind in ("sqlite", "postgres"):
        if args.only and args.only != kind:
            continue
        if kind == "postgres" and not args.postgres:
            print("postgres: skipped (give --postgres URL or BENCH_POSTGRES_URL)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            size = {"calls": args.calls, "kills": args.kills, "workers": args.workers}
            if kind == "sqlite":
                figures = run(str(folder / "log.db"), folder, sessions=args.sessions, **size)
            else:
                with fresh_database(args.postgres) as url:
                    figures = run(url, folder, sessions=args.sessions, **size)
        print(
            f"{figures.store}: {figures.calls} calls, {figures.kills} kills "
            f"({figures.workers_started} workers started), {figures.executions} executions, "
            f"executions per action {figures.per_action}, per call {figures.per_call}, "
            f"outcomes {figures.outcomes}, UNKNOWN {figures.unknown}, "
            f"wall {figures.wall_s:.1f} s"
        )
        for problem in figures.problems:
            print("  PROBLEM:", problem)
        failed = failed or bool(figures.problems)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
