"""The console's session timeline on a long session: the first page and a later one; and
every page of the console, timed as an operator meets it.

    .venv/bin/python bench/console.py [--events 100000] [--rounds 7] [--postgres URL]
    .venv/bin/python bench/console.py --pages [--events 30000]

Builds one planner session of about `--events` events on a fresh SQLite file (and, with
`--postgres URL`, in that database: it must be empty) by real governed calls of the remediation
example (normalize, decide, invoke of `change.get`), opens the console on the store as
`harnessc console` does, logs in, and times `GET /sessions/ID` (the first page of 50 events)
and `GET /sessions/ID?after=P` (a page from the middle of the session) through the console's
real route (Starlette's TestClient, the whole request: routing, session cookie, the store read,
the template). Prints the best and the median of `--rounds`, the page's size, and the machine's
load average. The target for the first page is 300 ms.

`--pages`: every page (the queue, a request, grants, sessions, a session's first and a later
page, the log, workflows) after one warm-up request, 20 requests each, in turns; prints the
median and the 95th percentile of each, against the target of 200 ms at the 95th.

Beside them, what the operators' commands add (`Harness.vouched`: the log's chain verified
before any of them acts): the first walk of the whole chain on the opened console, against the
time it took to open (to fold the log), which is what `harnessc approvals …` pays on top of its
own opening; and `GET /approvals` afterwards, which verifies only what was appended since.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harnessc.compiler.console.app import Console, build_app, settle_heap
from harnessc.compiler.console.auth import Operator, token_hash
from harnessc.compiler.pipeline import check
from harnessc.runtime import Facts, Harness, PendingCall, SQLiteStore
from harnessc.runtime.log.open import open_store
from harnessc.runtime.model import Spec
from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "remediation" / "remediation.harness"
ENGINEER = {"user": "u-1842", "role": "engineer", "tenant": "acme"}
FACTS = Facts.of(
    {"workspace.open": True, "workspace.root": "/repo", "release.freeze": False},
    connected={"change_platform"},
)
CHANGE = {"state": "deployed", "version": 1, "evidence_refs": ["evidence/scan.sarif"]}
TARGET_MS = 300.0
PAGE_TARGET_MS = 200.0


def compile_spec() -> Spec:
    result = check([str(SPEC)])
    assert result.model is not None, result.diagnostics
    return result.model


def fill(spec: Spec, url: str, events: int) -> None:
    """One session (`bench`) of about `events` events on the store at `url`: governed calls of
    `change.get`, six events each (requested, validated, decision, authorized, running,
    succeeded). SQLite is written with `synchronous=NORMAL`: the bench times reads."""
    store = (
        SQLiteStore(url[len("sqlite:///") :], synchronous="NORMAL")
        if url.startswith("sqlite:///")
        else open_store(url)
    )
    h = Harness(spec, store=store)
    h.bind("change.get", lambda args: {**args, **CHANGE})
    s = h.session("planner", actor=ENGINEER, task="task-bench", facts=FACTS, session_id="bench")
    for call in range(1, events // 6 + 1):
        pending = s.normalize("change.get", f"call-{call}", {"change_id": f"chg-{call}"})
        assert isinstance(pending, PendingCall), pending
        s.decide(pending)
        result = s.invoke(pending)
        assert result.ok, result.error
    store.close()


def timed(client: TestClient, path: str, rounds: int) -> tuple[list[float], int]:
    out = []
    size = 0
    for _ in range(rounds):
        start = time.perf_counter()
        r = client.get(path)
        out.append((time.perf_counter() - start) * 1000)
        assert r.status_code == 200, r.text[:500]
        size = len(r.content)
    return out, size


def measure(spec: Spec, url: str, rounds: int) -> dict[str, Any]:
    start = time.perf_counter()
    store = open_store(url)
    console = Console(Harness(spec, store), {"bench": _operator()}, url)  # as the command does
    opened = time.perf_counter() - start
    client = TestClient(build_app(console), follow_redirects=False)
    r = client.post("/login", data={"name": "bench", "password": "bench-token"})
    assert r.status_code == 303, r.text
    positions = [e.position for e in store.read("bench")]
    middle = positions[len(positions) // 2]
    first, first_size = timed(client, "/sessions/bench", rounds)
    later, later_size = timed(client, f"/sessions/bench?after={middle}", rounds)
    start = time.perf_counter()
    console.harness.vouched()  # what the first page of approvals or grants pays once
    walked = time.perf_counter() - start
    approvals, _ = timed(client, "/approvals", rounds)
    store.close()
    return {
        "events": len(positions),
        "opened_s": opened,
        "walked_s": walked,
        "approvals": approvals,
        "first": first,
        "first_size": first_size,
        "later": later,
        "later_size": later_size,
    }


def every_page(spec: Spec, url: str, requests: int = 20) -> dict[str, list[float]]:
    """Each page's server time (ms): one warm-up request, then `requests` in turns."""
    store = open_store(url)
    console = Console(Harness(spec, store), {"bench": _operator()}, url)
    client = TestClient(build_app(console), follow_redirects=False)
    settle_heap()  # as `harnessc console` does before it serves
    r = client.post("/login", data={"name": "bench", "password": "bench-token"})
    assert r.status_code == 303, r.text
    positions = [e.position for e in store.read("bench")]
    pages = [
        "/approvals",
        "/grants",
        "/sessions",
        "/sessions/bench",
        f"/sessions/bench?after={positions[len(positions) // 2]}",
        "/log",
        "/workflows",
    ]
    times: dict[str, list[float]] = {page: [] for page in pages}
    for page in pages:
        client.get(page)  # the warm-up: what a page pays once per console (a chain walk)
    for _ in range(requests):
        for page in pages:
            start = time.perf_counter()
            r = client.get(page)
            times[page].append((time.perf_counter() - start) * 1000)
            assert r.status_code in (200, 404), (page, r.status_code)
    store.close()
    gc.unfreeze()
    return times


def report_pages(name: str, times: dict[str, list[float]]) -> None:
    for page, values in times.items():
        p95 = statistics.quantiles(values, n=20)[-1]
        mark = "met" if p95 <= PAGE_TARGET_MS else "NOT met"
        print(
            f"{name:<10} {page:<28} median {statistics.median(values):8.1f} ms  "
            f"p95 {p95:8.1f} ms  (target ≤ {PAGE_TARGET_MS:.0f}: {mark})"
        )


def _operator() -> Operator:
    return Operator(name="bench", roles=("viewer",), token_hash=token_hash("bench-token"))


def report(name: str, m: dict[str, Any]) -> None:
    for page in ("first", "later"):
        values = m[page]
        best, median = min(values), statistics.median(values)
        mark = ""
        if page == "first":
            mark = "  (target ≤ 300 ms: " + ("met" if median <= TARGET_MS else "NOT met") + ")"
        print(
            f"{name:<10} {page:<6} page  best {best:8.1f} ms  median {median:8.1f} ms  "
            f"{m[page + '_size'] / 1024:6.1f} KiB{mark}"
        )
    opened, walked = m["opened_s"], m["walked_s"]
    print(f"{name:<10} {m['events']:,} events in the session; the console opened in {opened:.1f} s")
    print(
        f"{name:<10} the chain's first walk {walked:.2f} s ({walked / opened:.2f}× the opening); "
        f"then /approvals median {statistics.median(m['approvals']):.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--postgres", metavar="URL", help="also on this (empty) PostgreSQL database"
    )
    parser.add_argument("--pages", action="store_true", help="every page, p95 of 20 requests")
    args = parser.parse_args()
    spec = compile_spec()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("sqlite", f"sqlite:///{Path(tmp) / 'console.db'}")]
        if args.postgres:
            stores.append(("postgresql", args.postgres))
        for name, url in stores:
            start = time.perf_counter()
            fill(spec, url, args.events)
            print(f"{name:<10} built in {time.perf_counter() - start:.1f} s")
            if args.pages:
                report_pages(name, every_page(spec, url))
            else:
                report(name, measure(spec, url, args.rounds))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
