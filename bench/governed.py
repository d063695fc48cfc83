"""The governed call in a session, end to end: normalize, decide, (approve), invoke, on the
in-memory store and on a SQLite file, for an allowed call, an approved `once` call, a call
whose tool takes a `secret` argument (its values are scrubbed from everything recorded), and
the allowed call under a policy that also reads session state (`session`: a provenance term
and a windowed count, so each decision brings the session's ledger up to date from the log),
and `decide`: the allowed call normalized and decided only, never invoked (`sdecide`: the same
under the policy that reads session state: a decision with session terms, against `decide`;
`sflush`: `sdecide` with the ledger committing what the session holds and reading it back
before each decision, `Ledger.in_hand = False`, as it did before it took those events in hand);
`shadow` and `diverge`: `decide` with a candidate spec in shadow mode that agrees, or that asks
instead (a `decision.diverged` event rides each decision's commit).

    .venv/bin/python bench/governed.py [--calls 2000] [--rounds 3] [--threads 4] [--postgres URL]
        [--only memory|sqlite|postgres] [--cases decide,allow,…] [--telemetry]
        [--synchronous FULL|NORMAL]

Prints the median, p99 and mean microseconds per call of the best round for each case.
Executors do nothing, so the figures are the machinery's cost. On SQLite (`synchronous=FULL`) and on
PostgreSQL (`--postgres`, or BENCH_POSTGRES_URL: a database created and dropped per round) each
case is also given as a multiple of one commit (the median of single-event appends to the same
store, one timed after each call); `threads` runs the allowed call in that many sessions at
once, each on its own thread, and prints the calls per second of all of them against one
session's, and the wall time per call they make together as a multiple of the allowed case's
commit. `--synchronous NORMAL` leaves SQLite's fsync out of every commit, so what is left of
a call is the work around its commits. Run it on two checkouts side by side, in one shell
command, to compare them (the machines are shared: compare ratios, never lone figures).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, MemoryStore, PendingCall, SQLiteStore
from harnessc.runtime.judge.history import Ledger
from harnessc.runtime.log.events import NewEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pgdb import fresh_database

SPEC = """\
harness bench { version "1.0.0" }
tool change.create {
  summary "Open a change request."
  effects write reversible
  risk medium
  input { service: string, patch: string }
}
tool ops.run {
  summary "Run an operation."
  effects external
  risk medium
  input { command: string }
}
tool vault.put {
  summary "Store a credential."
  effects write
  risk medium
  input { name: string, value: string secret }
}
surface tools { expose change.*, ops.*, vault.* }
policy bench {
  default deny
  allow change.create, vault.put
  ask ops.run { approver role "ops"; grant once ttl 10m }
}
agent runner { surface tools; policy bench }
"""
# the same spec whose policy also reads session state (the allowed call still wins)
SESSION_SPEC = SPEC.replace(
    "  allow change.create, vault.put\n",
    "  allow change.create, vault.put\n"
    '  deny change.create when args.patch from untrusted only { reason "an injected patch" }\n'
    "  ask change.create when count(change.create within 1m) > 1000000 {\n"
    '    approver role "ops"\n'
    "  }\n",
)
ACTOR = {"user": "u-1", "role": "dev"}
OPS = {"user": "u-2", "role": "ops"}


CASES = ("decide", "sdecide", "sflush", "allow", "once", "secret", "session", "shadow", "diverge")
# shadow mode: `decide` with a candidate spec that agrees (`shadow`: one more judgement)
# or that asks instead (`diverge`: and a `decision.diverged` event in the decision's commit)
AGREE = SPEC.replace(
    "  default deny\n", '  default deny\n  deny ops.run when args.command == "rm" { reason "no" }\n'
)
DIVERGE = SPEC.replace(
    "  allow change.create, vault.put\n",
    '  allow vault.put\n  ask change.create { approver role "ops" }\n',
)


def compiled(text: str = SPEC) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
        assert result.ok and result.model is not None
        return result.model


def one_round(
    spec: Any,
    store: Any,
    case: str,
    calls: int,
    commits: list[float] | None = None,
    shadow: Any = None,
) -> list[float]:
    Ledger.in_hand = case != "sflush"
    h = Harness(spec, store=store, shadow=shadow)
    for tool in ("change.create", "ops.run", "vault.put"):
        h.bind(tool, lambda args: {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    if case in ("session", "sdecide", "sflush"):
        s.user_said("open a change for api with patch p")
    times: list[float] = []
    for i in range(calls):
        start = time.perf_counter()
        if case in ("allow", "session", "decide", "sdecide", "sflush", "shadow", "diverge"):
            call = s.normalize("change.create", f"c-{i}", {"service": "api", "patch": "p"})
        elif case == "secret":
            call = s.normalize("vault.put", f"c-{i}", {"name": "db", "value": f"s3cr3t-{i:08}"})
        else:
            call = s.normalize("ops.run", f"c-{i}", {"command": "restart api"})
        assert isinstance(call, PendingCall)
        if case == "once":
            h.approve(s.request_approval(call).request_id, by=OPS)
        else:
            s.decide(call)
        if case in ("decide", "sdecide", "sflush", "shadow", "diverge"):
            times.append(time.perf_counter() - start)
            if commits is not None:
                commits.extend(commit_cost(store, 1))
            continue
        result = s.invoke(call)
        times.append(time.perf_counter() - start)
        assert result.ran, result.error
        if commits is not None:  # one commit, timed between the calls on the same file
            commits.extend(commit_cost(store, 1))
    s.end()
    assert store.verify().ok
    return times


def commit_cost(store: Any, count: int) -> list[float]:
    """Seconds of each single-event append (one transaction, one fsync on SQLite)."""
    times: list[float] = []
    for i in range(count):
        start = time.perf_counter()
        store.append(NewEvent("bench", "Text", "note", {"i": i}))
        times.append(time.perf_counter() - start)
    return times


def concurrent(spec: Any, store: Any, threads: int, calls: int) -> float:
    """Calls per second of `threads` sessions calling at once on one store."""
    h = Harness(spec, store=store)
    h.bind("change.create", lambda args: {})
    sessions = [h.session("runner", actor=ACTOR, task="t-1") for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def work(k: int) -> None:
        s = sessions[k]
        barrier.wait()
        for i in range(calls):
            call = s.normalize("change.create", f"c-{k}-{i}", {"service": "api", "patch": "p"})
            assert isinstance(call, PendingCall)
            s.decide(call)
            assert s.invoke(call).ran

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    assert store.verify().ok
    return threads * calls / elapsed


def pct(samples: list[float]) -> tuple[float, float, float]:
    """Median, p99 and mean in µs (the mean counts work a store defers to a later call)."""
    ordered = sorted(samples)
    return (
        statistics.median(ordered) * 1e6,
        ordered[int(len(ordered) * 0.99)] * 1e6,
        statistics.fmean(ordered) * 1e6,
    )


@contextmanager
def fresh_store(
    kind: str, folder: Path, postgres: str | None, synchronous: str = "FULL"
) -> Iterator[Any]:
    """An empty store: in memory, a SQLite file in `folder` (with `synchronous`), or a database
    created on the PostgreSQL server of `postgres` (dropped afterwards)."""
    if kind == "memory":
        yield MemoryStore()
        return
    if kind == "sqlite":
        store = SQLiteStore(folder / f"{uuid.uuid4().hex[:8]}.db", synchronous=synchronous)
        try:
            yield store
        finally:
            store.close()
        return
    from harnessc.runtime.log.postgres import PostgresStore

    assert postgres is not None
    with fresh_database(postgres) as url:
        store = PostgresStore(url)
        try:
            yield store
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--postgres", metavar="URL", default=os.environ.get("BENCH_POSTGRES_URL"))
    parser.add_argument("--only", choices=("memory", "sqlite", "postgres"))
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES)
    )
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="with OpenTelemetry spans on (the `otel` extra; an SDK provider, nothing exported)",
    )
    args = parser.parse_args()
    if args.telemetry:
        from harnessc.runtime.integrations import telemetry
        from opentelemetry.sdk.trace import TracerProvider

        telemetry.enable(tracer_provider=TracerProvider())
    cases = [c for c in CASES if c in args.cases.split(",")]
    if args.only == "postgres" and not args.postgres:
        parser.error("--only postgres needs --postgres URL (or BENCH_POSTGRES_URL)")
    specs = {"plain": compiled(), "session": compiled(SESSION_SPEC)}
    shadows = {"shadow": compiled(AGREE), "diverge": compiled(DIVERGE)}
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        "µs per governed call, best round by median"
        + (f"; SQLite synchronous={args.synchronous}" if args.synchronous != "FULL" else "")
    )
    kinds = ["memory", "sqlite"] + (["postgres"] if args.postgres else [])
    for kind in [args.only] if args.only else kinds:
        alone = alone_commit = 0.0
        for case in cases:
            spec = specs["session" if case in ("session", "sdecide", "sflush") else "plain"]
            best = (float("inf"), 0.0, 0.0)
            commit = (0.0, 0.0, 0.0)
            for _ in range(args.rounds):
                with tempfile.TemporaryDirectory() as tmp:
                    with fresh_store(kind, Path(tmp), args.postgres, args.synchronous) as store:
                        calls = args.calls if kind == "memory" else max(args.calls // 4, 50)
                        commits: list[float] | None = [] if kind != "memory" else None
                        found = pct(one_round(spec, store, case, calls, commits, shadows.get(case)))
                    if found < best:
                        best = found
                        commit = pct(commits) if commits else commit
            ratio = ""
            if commit[0]:
                ratio = (
                    f"  {best[0] / commit[0]:5.2f}× a commit"
                    f" ({commit[0]:.0f} µs, p99 {commit[1]:.0f})"
                )
            if case == "allow":
                alone = 1e6 / best[0]
                alone_commit = commit[0]
            print(f"{kind:8} {case:7} {best[0]:9.1f} p99 {best[1]:9.1f} mean {best[2]:9.1f}{ratio}")
        if args.threads > 1 and kind != "memory" and alone:
            with (
                tempfile.TemporaryDirectory() as tmp,
                fresh_store(kind, Path(tmp), args.postgres, args.synchronous) as store,
            ):
                rate = concurrent(specs["plain"], store, args.threads, max(args.calls // 8, 25))
            per_call = (
                f", {1e6 / rate:.0f} µs a call, {1e6 / rate / alone_commit:.2f}× a commit"
                if alone_commit
                else ""
            )
            print(
                f"{kind:8} allow, {args.threads} sessions on threads: {rate:7.0f} calls/s, "
                f"{rate / alone:.2f}× one session's{per_call}"
            )


if __name__ == "__main__":
    main()
