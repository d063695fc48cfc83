"""Many worker processes on one PostgreSQL log: throughput, latency and cost as workers grow,
and a chaos run.

    .venv/bin/python bench/workers.py [--workers 1,2,4,8] [--sessions 16] [--calls 10]
        [--chaos-kills 4] [--postgres URL] [--full]

The benchmark starts its own PostgreSQL (Debian's package: `initdb` into a temporary folder,
`pg_ctl start` on a free port; as root through `runuser -u postgres`), unless `--postgres`
names a server (a fresh database is made there and dropped). For each worker count N it opens
M sessions (each with a user message naming its payees), then N worker processes work through
the calls, each its own share, interleaved across the sessions, so that every session is
continued by several workers (`h.resume` on a session another process opened) and its calls
arrive at the same time from different processes. A session's calls are a realistic mix:
reads (allowed), payments to a payee the user named (allowed while `count(pay.send) <= 4` and
the sum holds), payments to a payee nobody named (ASK, answered by an operator thread in this
process on its own harness: the worker waits until the answer reaches it); a session tries
six payments, so two hit the count limit. Every executor appends a line to a side file
(O_APPEND, so a killed worker's line survives).

Printed per N: governed calls per second (all calls over the wall time from the moment every
worker is ready), p50/p99 latency of a call that needs no human (normalize → invoke returned)
and p50 of the round trip of one that does (asked, answered by the operator, run), write
commits per call (distinct transactions among the log's rows), transactions per call (all of
them, reads included, from `pg_stat_database`) and CPU per call (the workers' and, when the
benchmark runs its own server, PostgreSQL's). Then the chaos run: N workers while a random one
is `kill -9`ed every second and replaced, and the figures that must be 0: calls lost (no
outcome recorded), calls executed twice, sessions over their limit.

tests/test_workers.py runs `measure` at a small size with kills. `--full`: 1, 2, 4, 8 workers
× 64 sessions × 10 calls, 8 kills.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LIMIT = 4
"""Payments a session may make (`count(pay.send) > 4` denies the fifth)."""

SPEC = f"""
harness workers {{ version "1.0.0" }}
tool note.read {{ summary "Read a note."; effects read; timeout 2s; input {{ n: int }} }}
tool pay.send {{
  summary "Send a payment."
  effects write external
  risk high
  timeout 2s
  input {{ to: string, cents: int }}
}}
policy p {{
  default deny
  cap: deny pay.send when count(pay.send) > {LIMIT} {{
    reason "At most {LIMIT} payments per session."
  }}
  budget: deny pay.send when sum(args.cents of pay.send) > 100000 {{
    reason "At most 1000.00 per session."
  }}
  payee: ask pay.send when not (args.to from user) {{
    approver role "ops"
    grant once ttl 10m
    reason "A payee the user did not name is approved."
  }}
  pay: allow pay.send
  reads: allow note.read
}}
surface s {{ expose note.*, pay.* }}
agent a {{ surface s; policy p }}
"""

OPS = {"user": "u-ops", "role": "ops"}
WAIT_S = 30.0
"""How long a worker waits for one call's outcome (an answer, a dead run's lease) before it
gives up on it (the parent then counts the call lost)."""


def plan(sessions: int, calls: int) -> list[tuple[int, str, str, dict[str, Any]]]:
    """The calls: (session index, tool, tool_call_id, args). Of each session's calls, the
    k-th is a read when k % 5 is 0 or 4, a payment to a named payee when 1 or 2, and to a
    payee nobody named (ASK) when 3."""
    out = []
    for s in range(sessions):
        for k in range(calls):
            kind = k % 5
            if kind in (0, 4):
                out.append((s, "note.read", f"c-{s}-{k}", {"n": k}))
            elif kind in (1, 2):
                out.append((s, "pay.send", f"c-{s}-{k}", {"to": f"acct-{s}-{k}", "cents": 100}))
            else:
                out.append((s, "pay.send", f"c-{s}-{k}", {"to": f"ext-{s}-{k}", "cents": 100}))
    return out


def said(s: int, calls: int) -> str:
    named = ", ".join(f"acct-{s}-{k}" for k in range(calls) if k % 5 in (1, 2))
    return f"please pay {named} the usual amount"


def open_store(url: str) -> Any:
    from harnessc.runtime.log.postgres import PostgresStore

    return PostgresStore(url)


# -- the worker -----------------------------------------------------------------------------


def worker(folder: str, url: str, index: int, workers: int, seed: int) -> None:
    """Work through this worker's share of the calls (the calls whose place in their session,
    plus the session's index, is `index` modulo `workers`), interleaved across sessions:
    resume the session, normalize, decide, ask and wait for the answer when the policy asks,
    invoke. Writes each call's latency to `latency-<pid>.txt`."""
    from harnessc.runtime import Harness, PendingCall, Spec
    from harnessc.runtime.session.approvals import ApprovalError

    base = Path(folder)
    config = json.loads((base / "plan.json").read_text(encoding="utf-8"))
    h = Harness(Spec.from_json((base / "spec.json").read_bytes()), store=open_store(url))
    h.lease_grace_ms = 0  # the lease is the tool's timeout (2 s): a killed run is UNKNOWN soon
    runs = os.open(base / "runs.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def execute(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        line = f"{ctx.action_id} {ctx.session_id} {ctx.pending.tool_call_id} {os.getpid()}\n"
        os.write(runs, line.encode())
        digest = json.dumps(args, sort_keys=True)  # a small executor: a little work
        return {"ok": True, "receipt": f"r-{abs(hash(digest)) % 10**8}"}

    h.bind("note.read", execute)
    h.bind("pay.send", execute)
    ids = config["sessions"]
    mine = [c for c in config["calls"] if (int(c[2].rsplit("-", 1)[1]) + c[0]) % workers == index]
    random.Random(seed).shuffle(mine)
    (base / f"ready-{os.getpid()}").write_text("", encoding="utf-8")
    while not (base / "go").exists():
        time.sleep(0.005)
    latencies = []
    for s_index, tool, call_id, args in mine:
        t0 = time.perf_counter()
        s = h.resume(ids[s_index])
        pending = s.normalize(tool, call_id, args)
        if not isinstance(pending, PendingCall):
            raise SystemExit(f"refused: {pending}")
        asked = s.decide(pending).effect == "ask"
        request = None
        if asked:
            # answered, or run, by another worker meanwhile: invoke says which
            with contextlib.suppress(ApprovalError, ValueError):
                request = s.request_approval(pending)
        if request is not None and request.status == "pending":
            # the operator answers in another process: LISTEN/NOTIFY brings it here
            h.wait_for_answer(request.request_id, timeout_s=WAIT_S)
        result = s.invoke(pending)
        deadline = time.monotonic() + WAIT_S
        while (
            not result.ran
            and result.error_category == "ran_elsewhere"
            and result.state == "RUNNING"
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)  # run by a worker that was killed: UNKNOWN once its lease ends
            result = s.invoke(pending)
        latencies.append(f"{'ask' if asked else 'call'} {(time.perf_counter() - t0) * 1e3:.3f}")
    (base / f"latency-{os.getpid()}.txt").write_text("\n".join(latencies), encoding="utf-8")


def hammer(
    spec_path: str, url: str, session_id: str, name: str, start_at: str, n: str, cents: str
) -> None:
    """Try `n` payments of `cents` in one session, one after another, from this process (to
    payees `acct-0`, `acct-1`, …), starting at the
    wall-clock time `start_at` (every process of a test starts at once); prints how many ran.
    tests/test_workers.py runs several at once on one session."""
    from harnessc.runtime import Harness, PendingCall, Spec

    h = Harness(Spec.from_json(Path(spec_path).read_bytes()), store=open_store(url))
    h.bind("pay.send", lambda args, ctx: {"ok": True})
    s = h.resume(session_id)
    while time.time() < float(start_at):
        time.sleep(0.001)
    ran = 0
    for i in range(int(n)):
        pending = s.normalize("pay.send", f"{name}-{i}", {"to": f"acct-{i}", "cents": int(cents)})
        assert isinstance(pending, PendingCall), pending
        ran += s.invoke(pending).ran
    print(ran)


# -- the operator ---------------------------------------------------------------------------


def operator(spec: Any, url: str, stop: threading.Event, poll_s: float = 0.5) -> None:
    """Answer every pending request, as an operator at the console would: a harness of its
    own on the log, which catches up whenever the log is appended to (LISTEN/NOTIFY; at
    least every `poll_s`) and approves what waits."""
    from harnessc.runtime import Harness
    from harnessc.runtime.session.approvals import ApprovalError

    h = Harness(spec, store=open_store(url))
    try:
        while not stop.is_set():
            h.catch_up()
            for request in list(h.approvals.requests.values()):
                if request.status == "pending":
                    with contextlib.suppress(ApprovalError, ValueError):
                        h.approve(request.request_id, by=OPS)
            h.store.wait_for_append(poll_s)
    finally:
        h.store.close()


# -- PostgreSQL -----------------------------------------------------------------------------


@contextlib.contextmanager
def own_postgres(folder: Path) -> Iterator[tuple[str, int]]:
    """A PostgreSQL server of Debian's package in `folder`, on a free loopback port, with its
    default settings (fsync on) and room for the workers' connections: its URL and the
    postmaster's pid; stopped at the end."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not bins:
        raise SystemExit("no PostgreSQL server here: apt-get install postgresql, or --postgres")
    pgbin = bins[-1]
    as_pg = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    data = folder / "pg"
    data.mkdir()
    if as_pg:
        shutil.chown(folder, "postgres")
        shutil.chown(data, "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    subprocess.run(
        [*as_pg, str(pgbin / "initdb"), "-D", str(data), "-A", "trust", "-U", "harnessc"],
        check=True,
        **quiet,  # type: ignore[arg-type]
    )
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c max_connections=100"
    ctl = [*as_pg, str(pgbin / "pg_ctl"), "-D", str(data), "-l", str(folder / "pg.log")]
    subprocess.run([*ctl, "-w", "-o", options, "start"], check=True, **quiet)  # type: ignore[arg-type]
    try:
        subprocess.run(
            [
                *as_pg,
                str(pgbin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "harnessc",
                "harnessc",
            ],
            check=True,
            **quiet,  # type: ignore[arg-type]
        )
        pid = int((data / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        yield f"postgresql://harnessc@127.0.0.1:{port}/harnessc", pid
    finally:
        subprocess.run([*ctl, "-m", "fast", "stop"], check=False, **quiet)  # type: ignore[arg-type]


def server_cpu_s(postmaster: int | None) -> float:
    """CPU seconds of the server: the postmaster, its live processes, and the backends it
    has reaped (a worker's connection ends with the worker)."""
    if postmaster is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


# -- the parent -----------------------------------------------------------------------------


@dataclass
class Figures:
    workers: int
    sessions: int
    calls: int
    wall_s: float
    call_ms: list[float]
    ask_ms: list[float]
    write_commits: int
    transactions: int
    worker_cpu_s: float
    server_cpu_s: float | None
    kills: int = 0
    started: int = 0
    lost: int = 0
    doubled: int = 0
    over_limit: int = 0
    unknown: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return self.calls / self.wall_s

    def pct(self, values: list[float], q: float) -> float:
        if not values:
            return float("nan")
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    url: str,
    folder: Path,
    *,
    workers: int,
    sessions: int,
    calls: int,
    kills: int = 0,
    kill_every_s: float = 1.0,
    postmaster: int | None = None,
    seed: int = 1,
    ceiling_s: float = 300.0,
) -> Figures:
    """One run on the fresh log at `url`: `sessions` sessions of `calls` calls each, worked
    by `workers` processes; with `kills`, a random worker is SIGKILLed every `kill_every_s`
    and replaced. `problems` lists every broken promise (lost, doubled, over the limit)."""
    import psycopg
    from harnessc.compiler.pipeline import check
    from harnessc.runtime import Harness

    rng = random.Random(seed)
    source = folder / "workers.harness"
    source.write_text(SPEC, encoding="utf-8")
    checked = check([source])
    assert checked.ok and checked.model is not None, [d.message for d in checked.diagnostics]
    spec = checked.model
    (folder / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    (folder / "runs.txt").write_text("", encoding="utf-8")

    opening = Harness(spec, store=open_store(url))
    ids = [
        opening.session(
            "a", actor={"user": f"u-{i}", "role": "dev"}, task=f"t-{i}", said=[said(i, calls)]
        ).id
        for i in range(sessions)
    ]
    opening.store.close()
    calls_planned = plan(sessions, calls)
    (folder / "plan.json").write_text(
        json.dumps({"sessions": ids, "calls": calls_planned}), encoding="utf-8"
    )

    started = 0

    def spawn(index: int) -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        err = open(folder / f"worker-{started}.err", "wb")  # noqa: SIM115 (the child's)
        process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "worker",
                str(folder),
                url,
                str(index),
                str(workers),
                str(seed * 1000 + started),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        err.close()
        return process

    def stats() -> tuple[int, int]:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            written = conn.execute("SELECT count(DISTINCT xmin::text) FROM harnessc.events")
            return int(row[0]) if row else 0, int(written.fetchone()[0])  # type: ignore[index]

    alive = {i: spawn(i) for i in range(workers)}
    deadline = time.monotonic() + ceiling_s
    while len(list(folder.glob("ready-*"))) < workers:
        if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in alive.values()):
            break
        time.sleep(0.01)
    stop = threading.Event()
    answering = threading.Thread(target=operator, args=(spec, url, stop), daemon=True)
    answering.start()
    time.sleep(0.2)  # the operator's harness is open
    xacts0, writes0 = stats()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server0 = server_cpu_s(postmaster)
    t0 = time.monotonic()
    (folder / "go").write_text("", encoding="utf-8")
    killed = 0
    next_kill = t0 + kill_every_s
    failed: list[str] = []
    while alive:
        if time.monotonic() > deadline:
            for p in alive.values():
                p.kill()
                p.wait()
            raise TimeoutError(f"the workers did not finish within {ceiling_s} s")
        for index, p in list(alive.items()):
            if p.poll() is not None:
                del alive[index]
                if p.returncode != 0:
                    failed.append(f"worker {index} exited {p.returncode}")
        if killed < kills and alive and time.monotonic() >= next_kill:
            index = rng.choice(sorted(alive))
            alive[index].kill()  # SIGKILL
            alive[index].wait()
            killed += 1
            alive[index] = spawn(index)  # the replacement takes up the same share
            (folder / "go").touch()
            next_kill = time.monotonic() + kill_every_s
        time.sleep(0.005)
    wall = time.monotonic() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server1 = server_cpu_s(postmaster)
    xacts1, writes1 = stats()
    stop.set()
    answering.join()

    # a day later every lease has ended: taking each session up records a dead run UNKNOWN
    late = datetime.now(UTC) + timedelta(days=1)
    final = Harness(spec, store=open_store(url), clock=lambda: late)
    for session_id in ids:
        final.resume(session_id)
    figures = settle(final.store, folder, ids, calls_planned)
    final.store.close()
    call_ms, ask_ms = [], []
    for path in folder.glob("latency-*.txt"):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line:
                kind, ms = line.split()
                (ask_ms if kind == "ask" else call_ms).append(float(ms))
    figures.problems[:0] = failed
    if killed < kills:
        figures.problems.append(f"only {killed} kills of {kills}: the run ended first")
    return Figures(
        workers=workers,
        sessions=sessions,
        calls=len(calls_planned),
        wall_s=wall,
        call_ms=call_ms,
        ask_ms=ask_ms,
        write_commits=writes1 - writes0,
        transactions=xacts1 - xacts0,
        worker_cpu_s=(cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
        server_cpu_s=(server1 - server0) if postmaster is not None else None,
        kills=killed,
        started=started,
        lost=figures.lost,
        doubled=figures.doubled,
        over_limit=figures.over_limit,
        unknown=figures.unknown,
        outcomes=figures.outcomes,
        problems=figures.problems,
    )


@dataclass
class Settled:
    lost: int
    doubled: int
    over_limit: int
    unknown: int
    outcomes: dict[str, int]
    problems: list[str]


def settle(store: Any, folder: Path, ids: list[str], planned: list[Any]) -> Settled:
    """What the log and the side file say at the end: calls without an outcome (lost), calls
    or actions executed more than once (doubled), sessions with more than `LIMIT` payments
    run or authorised (over the limit)."""
    state: dict[str, str] = {}
    of: dict[tuple[str, str], list[str]] = {}
    ran: set[str] = set()
    tool_of: dict[str, str] = {}
    for e in store.read():
        if e.type != "action.transition":
            continue
        action = e.payload["action_id"]
        state[action] = e.payload["to"]
        tool_of[action] = e.payload.get("tool_id", tool_of.get(action, ""))
        if e.payload["to"] == "RUNNING":
            ran.add(action)
        actions = of.setdefault((e.stream, e.payload["tool_call_id"]), [])
        if action not in actions:
            actions.append(action)
    ended = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")
    outcomes: dict[tuple[str, str], str] = {}
    for call, actions in of.items():
        chosen = next((a for a in actions if a in ran), actions[-1])
        if state[chosen] in ended:
            outcomes[call] = state[chosen]
    lost = [c for c in planned if (ids[c[0]], c[2]) not in outcomes]
    executions = [
        line.split() for line in (folder / "runs.txt").read_text(encoding="utf-8").splitlines()
    ]
    per_action = collections.Counter(e[0] for e in executions)
    per_call = collections.Counter((e[1], e[2]) for e in executions)
    doubled = sum(1 for n in per_call.values() if n > 1) + sum(
        1 for n in per_action.values() if n > 1
    )
    authorised: collections.Counter[str] = collections.Counter()
    for (stream, _), actions in of.items():
        for a in actions:
            if tool_of.get(a) == "pay.send" and a in ran:
                authorised[stream] += 1
    pays = {(ids[c[0]], c[2]) for c in planned if c[1] == "pay.send"}
    paid = collections.Counter(e[1] for e in executions if (e[1], e[2]) in pays)
    over = {s for s, n in authorised.items() if n > LIMIT} | {
        s for s, n in paid.items() if n > LIMIT
    }
    problems = []
    if lost:
        problems.append(f"{len(lost)} calls lost (no outcome recorded), e.g. {lost[:2]}")
    if doubled:
        problems.append(f"{doubled} calls or actions executed more than once")
    if over:
        problems.append(f"{len(over)} sessions ran more than {LIMIT} payments")
    unrecorded = set(per_action) - ran
    if unrecorded:
        problems.append(f"executed without a recorded RUNNING: {sorted(unrecorded)[:3]}")
    return Settled(
        lost=len(lost),
        doubled=doubled,
        over_limit=len(over),
        unknown=sum(1 for v in outcomes.values() if v == "UNKNOWN"),
        outcomes=dict(sorted(collections.Counter(outcomes.values()).items())),
        problems=problems,
    )


# -- printing -------------------------------------------------------------------------------


def row(f: Figures) -> str:
    cpu = f.worker_cpu_s + (f.server_cpu_s or 0.0)
    server = f"{f.server_cpu_s * 1e3 / f.calls:.1f}" if f.server_cpu_s is not None else "-"
    return (
        f"| {f.workers} | {f.sessions} | {f.calls} | {f.per_s:.0f} | "
        f"{f.pct(f.call_ms, 0.5):.1f} | {f.pct(f.call_ms, 0.99):.1f} | "
        f"{f.pct(f.ask_ms, 0.5):.0f} | {f.write_commits / f.calls:.2f} | "
        f"{f.transactions / f.calls:.1f} | {cpu * 1e3 / f.calls:.1f} | {server} |"
    )


HEADER = (
    "| workers | sessions | calls | calls/s | p50 ms | p99 ms | ask round trip p50 ms | "
    "write commits/call | transactions/call | CPU ms/call | of which PostgreSQL |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "hammer":
        hammer(*sys.argv[2:9])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--calls", type=int, default=10, help="calls per session")
    parser.add_argument("--chaos-kills", type=int, default=4)
    parser.add_argument("--chaos-workers", type=int, default=4)
    parser.add_argument("--postgres", help="a server to use instead of starting one")
    parser.add_argument("--full", action="store_true", help="64 sessions, 8 kills")
    args = parser.parse_args()
    if args.full:
        args.sessions, args.chaos_kills = 64, 8
    counts = [int(n) for n in args.workers.split(",")]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pgdb import fresh_database

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        server = (
            contextlib.nullcontext((args.postgres, None))
            if args.postgres
            else own_postgres(root / "server")
        )
        if not args.postgres:
            (root / "server").mkdir()
        with server as (base_url, postmaster):
            print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
            print(HEADER)
            runs = [(n, 0) for n in counts] + (
                [(args.chaos_workers, args.chaos_kills)] if args.chaos_kills else []
            )
            chaos: Figures | None = None
            for n, kills in runs:
                folder = root / f"run-{n}-{kills}"
                folder.mkdir()
                with fresh_database(base_url) as url:
                    f = measure(
                        url,
                        folder,
                        workers=n,
                        sessions=args.sessions,
                        calls=args.calls,
                        kills=kills,
                        postmaster=postmaster,
                    )
                if kills:
                    chaos = f
                else:
                    print(row(f), flush=True)
                for problem in f.problems:
                    print("  PROBLEM:", problem)
            if chaos is not None:
                print(
                    f"\nchaos: {chaos.workers} workers, {chaos.kills} kill -9 "
                    f"({chaos.started} started), {chaos.calls} calls in {chaos.wall_s:.1f} s: "
                    f"lost {chaos.lost}, doubled {chaos.doubled}, over the limit "
                    f"{chaos.over_limit}; outcomes {chaos.outcomes} (UNKNOWN: a run killed "
                    "mid-call, never run again)"
                )
            print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
