"""What a harness costs in memory and in log bytes, and how each cost grows with the work.

    .venv/bin/python bench/memory.py [--tools 50,500,5000] [--sessions 1,100,10000]
                                     [--calls 1000] [--results 1000] [--result-bytes 1024]

Each measurement runs in a fresh process (so one's garbage never counts in another's figure)
and reports two figures: Python's own allocations still alive (`tracemalloc`, exact and
independent of the allocator) and the growth of the resident set (RSS, what the machine pays,
which includes the allocator's slack and the libraries' own memory).

- `engine`: a `Harness` loaded from the model.json of a spec of T tools (bench/decide.py's
  spec: T tools, 1.5 T rules), without embeddings, with one decision per tool (each tool's
  rules are compiled on its first), then its lexical ranker made by one exposure: the fixed
  cost, per tool.
- `sessions`: N idle sessions opened in one harness on the 3-tool governed spec
  (bench/governed.py), each with its `session.started` event: bytes per session in memory and
  in the SQLite log.
- `calls`: C governed calls (normalize, decide, invoke) in one session: bytes per call.
- `released`: N sessions that each make one call and end, in a harness that releases what
  ended (`release_after_s`): what stays per session (the folded log's views of it).
- `results`: R results of `--result-bytes` of JSON text each, recorded and indexed for
  provenance in one session (a policy that reads provenance): bytes per indexed result.

The targets (issue: linear cost): every figure per unit stays flat as the count grows, and
10,000 idle sessions take less than 1 GiB of resident memory beyond the engine's fixed cost.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def rss() -> int:
    """The resident set of this process, in bytes (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


class Meter:
    """Python allocations alive and RSS, from a mark to now."""

    def __init__(self) -> None:
        gc.collect()
        self.py0 = tracemalloc.get_traced_memory()[0]
        self.rss0 = rss()

    def read(self) -> tuple[int, int]:
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - self.py0, rss() - self.rss0


def compiled(text: str) -> Any:
    from harnessc.compiler.pipeline import check

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
        assert result.ok and result.model is not None, result
        return result.model


def measure_engine(tools: int) -> dict[str, Any]:
    """A harness loaded from a build's model.json, as a service starts: the model, the engine
    and the caches a first decision fills, then the lexical ranker one exposure makes."""
    from decide import spec_text, tool_ids
    from harnessc.runtime import Harness
    from harnessc.runtime.judge.policy import CallContext

    spec = compiled(spec_text(tools))
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.json"
        model.write_text(spec.to_json(), encoding="utf-8")
        del spec
        tracemalloc.start()
        meter = Meter()
        h = Harness.from_json(model)
        decider = h.engine.decider("gen")
        actor, resource = {"role": "engineer", "tenant": "t"}, {"tenant": "t"}
        for tool_id in tool_ids(tools):  # every tool's decider, compiled on first use
            args = {"path": "/repo/a", "env": "staging"}
            decider.decide(CallContext(tool_id, args, actor=actor, resource=resource))
        built = meter.read()
        h.exposure_index()  # the ranker's index, made on first exposure
        ranked = meter.read()
    return {
        "what": "engine",
        "n": tools,
        "py": built[0],
        "rss": built[1],
        "py_ranker": ranked[0] - built[0],
        "rss_ranker": ranked[1] - built[1],
    }


def governed_harness(tmp: str, text: str | None = None) -> tuple[Any, Any, Path]:
    from governed import SPEC
    from harnessc.runtime import Harness, SQLiteStore

    path = Path(tmp) / "log.db"
    store = SQLiteStore(path, synchronous="NORMAL")
    h = Harness(compiled(text or SPEC), store=store)
    for tool in ("change.create", "ops.run", "vault.put"):
        h.bind(tool, lambda args: {})
    return h, store, path


def log_bytes(store: Any, after: int = 0) -> int:
    """The bytes of the events after position `after` as a store keeps them: every column's
    text, and 8 bytes for each number (the file's pages, indexes and slack come on top; SQLite
    grows its file a page at a time, too coarse to count a session by)."""
    total = 0
    for e in store.read(after=after):
        total += 16 + len(e.stream) + len(e.kind) + len(e.type) + len(e.payload_json)
        total += len(e.time) + len(e.prev_hash) + len(e.hash) + len(e.mac or "")
    return total


def measure_sessions(count: int) -> dict[str, Any]:
    from governed import ACTOR

    with tempfile.TemporaryDirectory() as tmp:
        h, store, _ = governed_harness(tmp)
        h.session("runner", actor=ACTOR, task="t-warm").end()  # first-use costs out of the way
        disk0 = store.head()[0]
        tracemalloc.start()
        meter = Meter()
        sessions = [h.session("runner", actor=ACTOR, task=f"t-{i}") for i in range(count)]
        py, grown = meter.read()
        disk = log_bytes(store, disk0)
        assert len(sessions) == count
        return {"what": "sessions", "n": count, "py": py, "rss": grown, "log": disk}


def measure_calls(count: int) -> dict[str, Any]:
    from governed import ACTOR
    from harnessc.runtime import PendingCall

    with tempfile.TemporaryDirectory() as tmp:
        h, store, _ = governed_harness(tmp)
        s = h.session("runner", actor=ACTOR, task="t-1")
        warm = s.normalize("change.create", "warm", {"service": "api", "patch": "p"})
        assert isinstance(warm, PendingCall)
        s.decide(warm)
        s.invoke(warm)
        disk0 = store.head()[0]
        tracemalloc.start()
        meter = Meter()
        for i in range(count):
            call = s.normalize("change.create", f"c-{i}", {"service": "api", "patch": f"p{i}"})
            assert isinstance(call, PendingCall)
            s.decide(call)
            assert s.invoke(call).ran
        py, grown = meter.read()
        return {"what": "calls", "n": count, "py": py, "rss": grown, "log": log_bytes(store, disk0)}


def measure_released(count: int) -> dict[str, Any]:
    """N sessions that each make one governed call and end, in a harness that releases ended
    sessions (`release_after_s`): what stays in memory per session once they are gone (the
    folded log's views of them)."""
    from governed import ACTOR
    from harnessc.runtime import PendingCall

    with tempfile.TemporaryDirectory() as tmp:
        h, store, _ = governed_harness(tmp)
        h.release_after_s = 3600.0

        def one(i: int) -> None:
            s = h.session("runner", actor=ACTOR, task=f"t-{i}")
            call = s.normalize("change.create", "c-1", {"service": "api", "patch": f"p{i}"})
            assert isinstance(call, PendingCall)
            s.decide(call)
            assert s.invoke(call).ran
            s.end()

        one(-1)
        disk0 = store.head()[0]
        tracemalloc.start()
        meter = Meter()
        for i in range(count):
            one(i)
        h.catch_up()  # the views of what was released, as a reader folds them
        py, grown = meter.read()
        assert not h.sessions
        return {
            "what": "released",
            "n": count,
            "py": py,
            "rss": grown,
            "log": log_bytes(store, disk0),
        }


PROVENANCE_SPEC_RULE = (
    '  deny change.create when args.patch from untrusted only { reason "an injected patch" }\n'
)


def measure_results(count: int, size: int) -> dict[str, Any]:
    """Results of `size` bytes of JSON each, from a tool whose output is indexed (untrusted),
    in a session whose policy reads provenance, so the ledger indexes every one."""
    from governed import ACTOR, SPEC
    from harnessc.runtime import PendingCall

    text = (
        SPEC.replace(
            "  input { command: string }\n}",
            "  input { command: string }\n  output { text: string, items: list<string> }\n"
            "  trust untrusted\n}",
        )
        .replace(
            "  allow change.create, vault.put\n",
            "  allow change.create, vault.put, ops.run\n" + PROVENANCE_SPEC_RULE,
        )
        .replace('  ask ops.run { approver role "ops"; grant once ttl 10m }\n', "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        h, store, _ = governed_harness(tmp, text)
        words = max(1, size // 40)

        def output(i: int) -> dict[str, Any]:
            items = [f"item-{i}-{k} at host{k}.example.com/path/{i}" for k in range(words)]
            return {"text": f"result {i}: " + " ".join(items[:3]), "items": items}

        outputs = iter(output(i) for i in range(count + 1))
        h.bind("ops.run", lambda args: next(outputs))
        s = h.session("runner", actor=ACTOR, task="t-1")

        def run(i: int) -> None:
            call = s.normalize("ops.run", f"r-{i}", {"command": f"list {i}"})
            assert isinstance(call, PendingCall)
            s.decide(call)
            assert s.invoke(call).ran
            # a decision that reads provenance brings the ledger up to date with the result
            probe = s.normalize("change.create", f"p-{i}", {"service": "api", "patch": "x"})
            assert isinstance(probe, PendingCall)
            s.decide(probe)

        run(-1)
        disk0 = store.head()[0]
        tracemalloc.start()
        meter = Meter()
        for i in range(count):
            run(i)
        py, grown = meter.read()
        return {
            "what": "results",
            "n": count,
            "py": py,
            "rss": grown,
            "log": log_bytes(store, disk0),
            "bytes": len(json.dumps(output(0))),
        }


def child(kind: str, n: int, size: int) -> dict[str, Any]:
    if kind == "engine":
        return measure_engine(n)
    if kind == "sessions":
        return measure_sessions(n)
    if kind == "calls":
        return measure_calls(n)
    if kind == "released":
        return measure_released(n)
    return measure_results(n, size)


def run_child(kind: str, n: int, size: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(n), str(size)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def per(value: int, n: int) -> str:
    return f"{value / n:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", default="50,500,5000")
    parser.add_argument("--sessions", default="1,100,10000")
    parser.add_argument("--calls", default="100,1000")
    parser.add_argument("--results", default="100,1000")
    parser.add_argument("--result-bytes", type=int, default=1024)
    parser.add_argument("--released", default="100,10000")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, n, size = args.child
        print(json.dumps(child(kind, int(n), int(size))))
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; bytes")
    print(f"{'what':<9} {'n':>6} {'py/unit':>10} {'rss/unit':>10} {'log/unit':>9}  total py, rss")
    rows: list[tuple[str, str]] = [("engine", t) for t in args.tools.split(",")]
    rows += [("sessions", n) for n in args.sessions.split(",")]
    rows += [("calls", n) for n in args.calls.split(",")]
    rows += [("results", n) for n in args.results.split(",")]
    rows += [("released", n) for n in args.released.split(",")]
    for kind, n_text in rows:
        n = int(n_text)
        found = run_child(kind, n, args.result_bytes)
        unit = {"engine": "tool", "released": "session"}.get(kind, kind[:-1])
        log = per(found["log"], n) if "log" in found else "-"
        print(
            f"{kind:<9} {n:>6} {per(found['py'], n):>10} {per(found['rss'], n):>10} {log:>9}  "
            f"{found['py'] / 2**20:.1f} MiB, {found['rss'] / 2**20:.1f} MiB (per {unit})"
            + (
                f"; ranker {per(found['py_ranker'], n)} py, {per(found['rss_ranker'], n)} rss"
                if kind == "engine"
                else ""
            )
            + (f"; each result {found['bytes']} B of JSON" if kind == "results" else "")
        )


if __name__ == "__main__":
    main()
