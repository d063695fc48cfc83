"""Durable workflows on DBOS: per-step overhead, workflows per second with 1 and 3 workers, the
gate round trip and the memory of runs waiting at gates, on SQLite and PostgreSQL.

    .venv/bin/python bench/workflow.py [--runs 30] [--waiting 300] [--postgres URL]
    .venv/bin/python bench/workflow.py --baseline CHECKOUT [--rounds 3] [--postgres URL]

Each measurement starts from a fresh store (a temporary SQLite file; a fresh database on the
PostgreSQL server of `--postgres`, created and dropped). Executors do nothing, so the numbers are
the cost of the machinery: the governed call (normalize, decide, invoke, events), DBOS's
checkpoints (which carry each step's events) and the log's append of them, off the step's
path.

- step overhead: (latency of a 16-step run − latency of a 1-step run) / 15, median of 9, each
  latency from the start of the run's first step (`workflow.started`) to the end of its last
  (`workflow.completed`) as DBOS stamped them (the log's own stamps are the appender's, which
  works off the steps' path); beside it, the same figure for DBOS alone (a workflow of steps
  that do nothing, on the same engine) and the governed call of a step alone, outside DBOS
  (normalize, decide, invoke, its events gathered for DBOS's checkpoint), median of 200, and
  the 16th step of a 16-step run the same way (its session seeded with the 15 results before
  it, the run's state recorded), median of 300; with `--baseline`, also the latency of a
  64-step branch-heavy run (`fan`: groups of three parallel branches and a call joining them),
  median of 5;
- workflows/s: `--runs` runs of 4 steps created at once, until the last one completes, with 1
  worker (this process) and with 3 worker processes sharing the queue;
- gate round trip: `decide` until the run has taken the decision and published it (median);
- waiting: the worker's resident memory and threads before and after `--waiting` runs wait at a
  gate (the interpreter is async: a waiting run holds no thread).

`--baseline CHECKOUT` (a checkout of another commit) measures only the step overhead, of this
tree and of that one side by side: `--rounds` rounds, each a process per tree and store kind,
the two trees alternating (which one goes first alternates too), and prints each round's
figures and their medians, with DBOS alone measured in every process.

`--bytes` measures what a run keeps instead, for runs of 16, 128 and 1,024 steps (`--lengths`)
of calls with tiny results, each run alone on a fresh store, of two shapes (`--shapes`): `line`,
calls one after the other, and `fan`, branch-heavy: groups of three parallel branches (each a
child workflow of DBOS) and a call joining them, each group after the one before:

- the log: the bytes of the payloads of every event on the run's streams, per step, and apart
  the run's state its steps record (`workflow.state`, `workflow.delta`) and the sources each
  step's session is seeded with (`workflow.sources`);
- DBOS's own tables: the bytes of every row of the run and its child workflows (each step's
  checkpointed output, the run's input and output, its events and messages), per step, and
  the same without the sources the checkpointed outputs carry (`DBOS-src`);
- reading the longest run: `status` (what `harnessc workflow show` and the console's run view
  read) and the run's state alone (`run_state`), median of 15, taking turns with the same
  reads of a run of the same length recording whole states as before deltas (its state read
  as it was then: the newest whole state);

and the ratio of each figure per step at the longest run to the same at the shortest. With
`--baseline CHECKOUT` the same is measured for that tree too, in a process of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_scale import importable
from pgdb import fresh_database

STEPS = 16
FAN_STEPS = 64
"""The steps of the branch-heavy run whose latency `--baseline` measures too (`fan`)."""
LENGTHS = (16, 128, 1024)
"""The runs `--bytes` measures, in steps."""
REPEAT = 9
"""Runs of each length (and DBOS workflows) whose median latency makes the step overhead."""
READS = 15
"""Reads of the longest run whose median is its read time."""


def chain(name: str, steps: int) -> str:
    """A workflow of `steps` calls one after the other."""
    return (
        f"workflow {name} {{\n  agent runner\n  step s1 = call job.run(n: 1)\n"
        + "".join(
            f"  step s{i} = call job.run(n: {i}) after s{i - 1}\n" for i in range(2, steps + 1)
        )
        + "}\n"
    )


def fan(name: str, steps: int) -> str:
    """A branch-heavy workflow of `steps` calls (a multiple of 4): groups of three parallel
    branches, each group after the step that joined the group before, and a step joining the
    three; three steps in four run as parallel branches (child workflows)."""
    out = f"workflow {name} {{\n  agent runner\n"
    for g in range(1, steps // 4 + 1):
        after = f" after j{g - 1}" if g > 1 else ""
        for k in (1, 2, 3):
            out += f"  step b{g}x{k} = call job.run(n: {10 * g + k}){after}\n"
        out += f"  step j{g} = call job.run(n: {10 * g}) after b{g}x1, b{g}x2, b{g}x3\n"
    return out + "}\n"


SHAPES = {"line": chain, "fan": fan}
"""The shapes of run `--bytes` measures: calls one after the other; groups of parallel
branches joined by a call."""


SPEC = (
    """\
harness bench { version "1.0.0" }
tool job.run {
  summary "Do nothing and return the number."
  use_when "A benchmark step."
  effects write reversible
  input { n: int }
  output { n: int }
}
surface tools { expose job.* }
policy bench {
  default deny
  allow job.run
}
agent runner {
  surface tools
  policy bench
}
workflow one {
  agent runner
  step s1 = call job.run(n: 1)
}
workflow four {
  agent runner
  step s1 = call job.run(n: 1)
  step s2 = call job.run(n: 2) after s1
  step s3 = call job.run(n: 3) after s2
  step s4 = call job.run(n: 4) after s3
}
workflow gate {
  agent runner
  step g = decide "Go?" {
    options go, stop
    by role "ops"
    timeout 1h default stop
  }
  step s1 = call job.run(n: 1) when g == go
}
"""
    + chain("many", STEPS)
    + fan("branches", FAN_STEPS)
)
ACTOR = {"user": "bench", "role": "ops"}


def compile_spec(folder: Path, lengths: tuple[int, ...] = LENGTHS) -> Path:
    from harnessc.compiler.pipeline import check

    source = folder / "bench.harness"
    text = SPEC + "".join(shape(f"{name}{n}", n) for name, shape in SHAPES.items() for n in lengths)
    source.write_text(text, encoding="utf-8")
    result = check([source])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    path = folder / "spec.json"
    path.write_text(result.model.to_json(), encoding="utf-8")
    return path


def harness(spec_path: Path, url: str) -> Any:
    from harnessc.runtime import Harness, SQLiteStore
    from harnessc.runtime.model import Spec

    if url.startswith("sqlite:///"):
        store: Any = SQLiteStore(url[len("sqlite:///") :])
    else:
        from harnessc.runtime.log.postgres import PostgresStore

        store = PostgresStore(url)
    h = Harness(Spec.from_json(spec_path.read_bytes()), store=store)
    h.bind("job.run", lambda args: {"n": args["n"]})
    return h


@contextmanager
def fresh_store(kind: str, folder: Path, postgres: str | None) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{folder / ('bench-' + uuid.uuid4().hex[:8] + '.db')}"
        return
    assert postgres is not None
    with fresh_database(postgres) as url:
        yield url


def wait_all(wf: Any, ids: list[str], timeout_s: float = 600.0) -> None:
    """Wait for every run with `Workflows.wait`, which reads a run's state only when it
    starts waiting and once the run has ended (this worker's runs say when they end)."""
    deadline = time.monotonic() + timeout_s
    for run in ids:
        if wf.wait(run, timeout_s=max(deadline - time.monotonic(), 0.0))["status"] != "completed":
            raise SystemExit(f"the run {run} did not complete")


def latency(wf: Any, name: str) -> float:
    """A run's time inside the engine: from the start of its first DBOS step (the one that
    records `workflow.started`) to the end of its last (`workflow.completed`), as DBOS stamped
    them in its checkpoints (the wait for it here, the queue's pickup and the log's append after
    the last checkpoint are not counted)."""
    run = wf.create(name, {}, actor=ACTOR, start=True)
    wait_all(wf, [run])
    steps = {s["function_name"]: s for s in wf._need_client().list_workflow_steps(run)}
    start = steps["record:~start"]["started_at_epoch_ms"]
    end = steps["record:~end"]["completed_at_epoch_ms"]
    return float(end - start) / 1000


def _nothing(n: int) -> int:
    return n


def register_bare() -> Any:
    """DBOS alone, registered before the engine launches: a workflow whose steps do nothing
    (no harness, no log). Its per-step cost is the floor under the governed step."""
    from dbos import DBOS

    @DBOS.workflow(name="bench.bare")
    async def bare(steps: int) -> float:
        start = time.perf_counter()
        for i in range(steps):
            await DBOS.run_step_async({"name": f"bare:{i}"}, _nothing, i)
        return time.perf_counter() - start

    return bare


def bare_step_ms(bare: Any) -> float:
    from dbos import DBOS

    def took(steps: int) -> float:
        result: float = DBOS.start_workflow(bare, steps).get_result()
        return result

    took(1)
    ones = [took(1) for _ in range(REPEAT)]
    manys = [took(STEPS) for _ in range(REPEAT)]
    return (statistics.median(manys) - statistics.median(ones)) / (STEPS - 1) * 1000


def governed_step_ms(h: Any, rounds: int = 200) -> float:
    """The governed call of one step alone, outside DBOS: open the session, normalize, decide,
    invoke, and gather its events into the step's output (the log appends them after DBOS's
    checkpoint, off the step's path)."""
    from harnessc.runtime.workflows import steps as workflow_steps

    ctx = {"workflow_id": "bench", "workflow": "bench.one", "agent": "bench.runner"}
    ctx["actor"] = ACTOR
    publish = ("workflow.state", {"state": {}})
    took = []
    tag = uuid.uuid4().hex[:8]
    for i in range(rounds + 20):
        key = f"s1#{tag}-{i}"
        start = time.perf_counter()
        workflow_steps.call_step(
            ctx, "s1", "job.run", {"n": 1}, f"workflow:bench/{key}", key, None, lambda _: publish
        )
        took.append(time.perf_counter() - start)
    return statistics.median(took[20:]) * 1000


def nth_step_ms(h: Any, rounds: int = 300) -> float:
    """The 16th step of the `many` workflow as the interpreter runs it, outside DBOS: the
    governed call in a session seeded with the run's input and the 15 results before it, and
    the change it records in the run's state (what a step does besides DBOS's checkpoint)."""
    from harnessc.runtime.judge.availability import Facts
    from harnessc.runtime.session.sessions import facts_record
    from harnessc.runtime.workflows import interpreter
    from harnessc.runtime.workflows import steps as workflow_steps
    from harnessc.runtime.workflows.plan import workflow_hash

    wf = h.spec.workflows["bench.many"]
    run = interpreter._Run(
        {
            "workflow": wf.model_dump(mode="json"),
            "hash": workflow_hash(wf),
            "agent": wf.agent,
            "input": {},
            "actor": ACTOR,
            "facts": facts_record(Facts.of(None)),
        }
    )
    run.state["status"] = "running"
    for i in range(1, STEPS):
        run.visited.add(f"s{i}")
        run.values[f"s{i}"] = {"n": i}
        run.state["steps"][f"s{i}"].update(state="succeeded", value={"n": i}, attempts=1)
        run.state["artifacts"].append({"step": f"s{i}", "value": {"n": i}})
    if hasattr(run, "shown"):  # the state as the 15 steps before recorded it
        from harnessc.runtime.workflows.plan import own_state

        run.shown = own_state(run.snapshot())
    last = run.steps[f"s{STEPS}"]
    run.visited.add(last.name)
    run.wave = [last]
    took = []
    tag = uuid.uuid4().hex[:8]
    for i in range(rounds + 30):
        key = f"{last.name}#{tag}-{i}"
        start = time.perf_counter()
        workflow_steps.call_step(
            {**run.ctx, "sources": run.sources()},
            last.name,
            "job.run",
            {"n": STEPS},
            run.stream(key),
            f"bench/{key}",
            None,
            run.after(last.name, artifact=True),
        )
        took.append(time.perf_counter() - start)
    return statistics.median(took[30:]) * 1000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def step_figures(wf: Any, bare: Any) -> tuple[float, float, float, float]:
    """(1-step run, 16-step run, governed step overhead, DBOS's own step), ms."""
    latency(wf, "one")  # warm up
    ones = [latency(wf, "one") for _ in range(REPEAT)]
    manys = [latency(wf, "many") for _ in range(REPEAT)]
    one, many = statistics.median(ones) * 1000, statistics.median(manys) * 1000
    return one, many, (many - one) / (STEPS - 1), bare_step_ms(bare)


def measure_steps(kind: str, spec_path: Path, folder: Path, args: argparse.Namespace) -> None:
    """The step overhead alone, printed as one line for `--baseline` to read."""
    with fresh_store(kind, folder, args.postgres) as url:
        h = harness(spec_path, url)
        bare = register_bare()
        wf = h.workflows.configure(url, executor_id="bench-1", poll_s=args.poll)
        one, many, per_step, dbos = step_figures(wf, bare)
        nth = nth_step_ms(h)
        branches = statistics.median(latency(wf, "branches") for _ in range(5)) * 1000
        print(
            f"steps {one:.3f} {many:.3f} {per_step:.4f} {dbos:.4f} {nth:.4f} {branches:.1f}",
            flush=True,
        )
        wf.close()
        h.store.close()


def measure(kind: str, spec_path: Path, folder: Path, args: argparse.Namespace) -> None:
    # one process runs one DBOS: each measurement in this process gets its own store and engine
    with fresh_store(kind, folder, args.postgres) as url:
        h = harness(spec_path, url)
        bare = register_bare()
        wf = h.workflows.configure(url, executor_id="bench-1", poll_s=args.poll)
        one, many, per_step, dbos = step_figures(wf, bare)
        print(
            f"{kind:<8} step overhead {per_step:6.2f} ms  "
            f"(1-step run {one:.1f} ms, {STEPS}-step run {many:.1f} ms, median of {REPEAT})"
        )
        print(f"{kind:<8} DBOS alone    {dbos:6.2f} ms  (a step that does nothing)")
        print(
            f"{kind:<8} governed call {governed_step_ms(h):6.2f} ms  "
            "(a step's call and its events, outside DBOS)"
        )
        print(
            f"{kind:<8} 16th step     {nth_step_ms(h):6.2f} ms  "
            "(the same with 15 results before it and the run's state, outside DBOS)"
        )
        start = time.perf_counter()
        ids = [wf.create("four", {}, actor=ACTOR, start=True) for _ in range(args.runs)]
        wait_all(wf, ids)
        took = time.perf_counter() - start
        print(f"{kind:<8} 1 worker   {args.runs / took:6.1f} workflows/s  ({args.runs} × 4 steps)")

        trips = []
        for _ in range(5):
            run = wf.create("gate", {}, actor=ACTOR, start=True)
            while not wf.status(run)["pending_gates"]:
                time.sleep(0.005)
            start = time.perf_counter()
            wf.decide(run, "g", "go", by=ACTOR)
            while wf.status(run)["gates"]["g"].get("status") != "decided":
                time.sleep(0.002)
            trips.append(time.perf_counter() - start)
            wait_all(wf, [run])
        print(
            f"{kind:<8} gate round trip  median {statistics.median(trips) * 1000:.0f} ms, "
            f"best {min(trips) * 1000:.0f} ms"
        )

        before, threads = rss_mb(), threading.active_count()
        waiting = [wf.create("gate", {}, actor=ACTOR, start=True) for _ in range(args.waiting)]
        deadline = time.monotonic() + 600
        while sum(bool(wf.status(r)["pending_gates"]) for r in waiting[-5:]) < 5:
            if time.monotonic() > deadline:
                raise SystemExit("runs did not reach their gates")
            time.sleep(0.1)
        for r in waiting:
            while not wf.status(r)["pending_gates"]:
                time.sleep(0.05)
        print(
            f"{kind:<8} {args.waiting} runs waiting: RSS {before:.0f} → {rss_mb():.0f} MB, "
            f"threads {threads} → {threading.active_count()}"
        )
        wf.close()
        h.store.close()

    with fresh_store(kind, folder, args.postgres) as url:
        h = harness(spec_path, url)
        wf = h.workflows.configure(url, run=False)
        workers = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", str(spec_path), url, f"w{i}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(3)
        ]
        try:
            for w in workers:
                assert w.stdout is not None and w.stdout.readline().strip() == "ready"
            start = time.perf_counter()
            ids = [wf.create("four", {}, actor=ACTOR, start=True) for _ in range(args.runs)]
            wait_all(wf, ids)
            took = time.perf_counter() - start
        finally:
            for w in workers:
                assert w.stdin is not None and w.stdout is not None
                w.stdin.close()
                w.wait(timeout=60)
                w.stdout.close()
        print(f"{kind:<8} 3 workers  {args.runs / took:6.1f} workflows/s  ({args.runs} × 4 steps)")
        wf.close()
        h.store.close()


# -- what a run keeps: bytes per step -----------------------------------------------------------

STATE_TYPES = ("workflow.state", "workflow.delta")
SOURCES_TYPE = "workflow.sources"
DBOS_COLUMNS = {
    "operation_outputs": ("workflow_uuid", ("output", "error")),
    "workflow_status": ("workflow_uuid", ("inputs", "output", "error")),
    "workflow_input": ("workflow_uuid", ("inputs",)),
    "workflow_output": ("workflow_uuid", ("output", "error")),
    "workflow_events": ("workflow_uuid", ("key", "value")),
    "workflow_events_history": ("workflow_uuid", ("key", "value")),
    "notifications": ("destination_uuid", ("message",)),
    "streams": ("workflow_uuid", ("value",)),
}
"""DBOS's tables that hold what a run carries, with the column naming the run and the columns
whose bytes are counted (what DBOS keeps of a run besides fixed-size columns)."""


def log_bytes(store: Any, run: str) -> dict[str, int]:
    """The payload bytes of the events on the run's streams: all, its state records, its
    steps' sources."""
    out = {"all": 0, "state": 0, "sources": 0}
    prefix = f"workflow:{run}/"
    for e in store.read():
        if not e.stream.startswith(prefix):
            continue
        size = len(e.payload_json.encode("utf-8"))
        out["all"] += size
        if e.type in STATE_TYPES:
            out["state"] += size
        elif e.type == SOURCES_TYPE:
            out["sources"] += size
    return out


def dbos_bytes(url: str, run: str) -> tuple[int, int]:
    """The bytes DBOS keeps of the run and its child workflows (`<run>::<step>`), over the
    columns of `DBOS_COLUMNS`, in its system database for the store at `url`; and of them, the
    bytes of the `workflow.sources` events its steps' checkpointed outputs carry (each event's
    payload text as a JSON string, as the output holds it)."""
    import json

    from harnessc.runtime.workflows.durable import system_database_url

    system = system_database_url(url)
    if system.startswith("sqlite:///"):
        import sqlite3

        conn: Any = sqlite3.connect(system[len("sqlite:///") :])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        size, schema, mark = "length(CAST({} AS BLOB))", "", "?"
    else:
        import psycopg

        conn = psycopg.connect(system)
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'dbos'"
            )
        }
        size, schema, mark = "octet_length({}::text)", "dbos.", "%s"
    total = sources = 0
    try:
        for table, (key, columns) in DBOS_COLUMNS.items():
            if table not in tables:
                continue
            sizes = " + ".join(f"coalesce({size.format(c)}, 0)" for c in columns)
            row = conn.execute(
                f"SELECT coalesce(sum({sizes}), 0) FROM {schema}{table} "
                f"WHERE {key} = {mark} OR {key} LIKE {mark}",
                (run, run + "::%"),
            ).fetchone()
            total += int(row[0])
        outputs = conn.execute(
            f"SELECT output FROM {schema}operation_outputs "
            f"WHERE workflow_uuid = {mark} OR workflow_uuid LIKE {mark}",
            (run, run + "::%"),
        ).fetchall()
    finally:
        conn.close()
    for (output,) in outputs:
        found = json.loads(output) if output else None
        for event in found.get("events") or () if isinstance(found, dict) else ():
            if event[2] == SOURCES_TYPE:
                sources += len(json.dumps(event[3]).encode("utf-8"))
    return total, sources


def whole_state_read(store: Any, run: str) -> Any:
    """How a run's state was read before deltas (`run_state` then): the newest whole state its
    steps recorded, with the views its parallel branches recorded laid over it."""
    import json

    prefix = f"workflow:{run}/"
    state = json.loads(store.last(prefix, "workflow.state").payload_json)["state"]
    for event in store.read_prefix(prefix, "workflow.branch"):
        branch = json.loads(event.payload_json)
        if state["steps"].get(branch["step"], {}).get("state") in ("pending", "running", "waiting"):
            state["steps"].update(branch["steps"])
            state["gates"].update(branch["gates"])
    return state


@contextmanager
def whole_states() -> Iterator[None]:
    """Runs started inside record the run's whole state with every step, as before deltas."""
    from harnessc.runtime.workflows import interpreter

    publication = interpreter._Run.publication

    def whole(self: Any, state: dict[str, Any]) -> Any:
        if self.branch is None:
            return "workflow.state", {"state": state}
        return publication(self, state)

    interpreter._Run.publication = whole  # type: ignore[method-assign]
    try:
        yield
    finally:
        interpreter._Run.publication = publication  # type: ignore[method-assign]


def read_ms(reads: dict[str, Any]) -> dict[str, float]:
    """The median time of each read, ms, the reads taking turns (`READS` rounds)."""
    took: dict[str, list[float]] = {name: [] for name in reads}
    for n in range(READS + 1):
        for name, read in reads.items():
            start = time.perf_counter()
            read()
            if n:  # the first round warms up
                took[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1000 for name, t in took.items()}


def measure_bytes(kind: str, spec_path: Path, folder: Path, args: argparse.Namespace) -> None:
    """One line per shape and run length, `bytes SHAPE N ALL STATE SOURCES DBOS DBOS-SOURCES`
    (bytes per step), and for the longest `line`, `read …`: `status` and the state alone of
    that run, and, in a tree that records deltas, the same of a run recording whole states as
    before (`whole_states`), the state read as it was then (`whole_state_read`), side by side.
    For `bytes_table` to read."""
    from harnessc.runtime.workflows import plan

    with fresh_store(kind, folder, args.postgres) as url:
        h = harness(spec_path, url)
        wf = h.workflows.configure(url, executor_id="bench-1", poll_s=args.poll)
        runs = {}
        for shape in args.shapes:
            for n in args.lengths:
                run = wf.create(f"{shape}{n}", {}, actor=ACTOR, start=True)
                wait_all(wf, [run], timeout_s=3600)
                runs[shape, n] = run
                found = log_bytes(h.store, run)
                dbos, dbos_sources = dbos_bytes(url, run)
                print(
                    f"bytes {shape} {n} {found['all'] / n:.1f} {found['state'] / n:.1f} "
                    f"{found['sources'] / n:.1f} {dbos / n:.1f} {dbos_sources / n:.1f}",
                    flush=True,
                )
        longest = max(args.lengths)
        if "line" not in args.shapes:
            wf.close()
            h.store.close()
            return
        run = runs["line", longest]
        reads = {
            "status": lambda: wf.status(run),
            "state": lambda: plan.run_state(h.store, run),
        }
        if hasattr(plan, "DELTA_EVENT"):
            with whole_states():
                before = wf.create(f"line{longest}", {}, actor=ACTOR, start=True)
                wait_all(wf, [before], timeout_s=3600)
            reads["status, whole states"] = lambda: wf.status(before)
            reads["state, whole states read as before"] = lambda: whole_state_read(h.store, before)
        figures = read_ms(reads)
        print("read " + " ".join(f"{figures[name]:.3f}" for name in reads), flush=True)
        wf.close()
        h.store.close()


def bytes_table(kinds: list[str], spec_path: Path, folder: Path, args: argparse.Namespace) -> None:
    """`measure_bytes` for this tree (and `--baseline`'s), a process each, as a table."""
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline is not None:
        trees.insert(0, ("baseline", importable(args.baseline.resolve(), folder / "baseline")))
    lengths = ",".join(str(n) for n in args.lengths)
    for kind in kinds:
        for name, path in trees:
            env = dict(os.environ)
            if path is not None:
                env["PYTHONPATH"] = str(path)
            command = [sys.executable, __file__, "--bytes-only", kind, str(spec_path)]
            command += ["--lengths", lengths, "--shapes", ",".join(args.shapes)]
            if args.postgres:
                command += ["--postgres", args.postgres]
            done = subprocess.run(
                command, env=env, cwd=folder, capture_output=True, text=True, check=False
            )
            if done.returncode:
                raise SystemExit(f"{name}: the measurement failed\n{done.stderr[-2000:]}")
            rows = [x.split()[1:] for x in done.stdout.splitlines() if x.startswith("bytes ")]
            reads = [x.split()[1:] for x in done.stdout.splitlines() if x.startswith("read ")]
            for shape in dict.fromkeys(row[0] for row in rows):
                print(f"{kind} — {name}, {shape} (load {os.getloadavg()[0]:.2f}); bytes per step:")
                _bytes_rows([row[1:] for row in rows if row[0] == shape])
            if reads:
                took = [float(x) for x in reads[-1]]
                print(
                    f"  reading the {max(args.lengths)}-step line run: status {took[0]:.2f} ms, "
                    f"its state alone {took[1]:.2f} ms (median of {READS})"
                )
            if reads and len(reads[-1]) == 4:
                print(
                    f"  the same run recording whole states, as before: status {took[2]:.2f} ms,"
                    f" its state read as before {took[3]:.2f} ms; deltas / whole states: "
                    f"status {took[0] / took[2]:.2f}×, state {took[1] / took[3]:.2f}×"
                )


def _bytes_rows(rows: list[list[str]]) -> None:
    """One shape's bytes per step by run length, and the longest's over the shortest's."""
    labels = ("log", "state", "sources", "rest", "DBOS", "DBOS-src")
    print("  " + " ".join(f"{x:>9}" for x in ("steps", *labels)))
    figures = {}
    for row in rows:
        n, total, state, sources, dbos, dbos_sources = int(row[0]), *map(float, row[1:])
        rest = total - state - sources
        figures[n] = (total, state, sources, rest, dbos, dbos - dbos_sources)
        print(f"  {n:>9} " + " ".join(f"{x:>9.0f}" for x in figures[n]))
    short, long = figures[min(figures)], figures[max(figures)]
    ratios = "  ".join(
        f"{label} {b / a:.2f}×" if a else f"{label} –"
        for label, a, b in zip(labels, short, long, strict=True)
    )
    print(f"  {max(figures)} steps / {min(figures)} steps, per step: {ratios}")


def worker(spec_path: str, url: str, executor: str) -> None:
    h = harness(Path(spec_path), url)
    wf = h.workflows.configure(url, executor_id=executor, poll_s=0.01, heartbeat_s=1.0)
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    wf.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--waiting", type=int, default=300)
    parser.add_argument("--postgres", metavar="URL", default=os.environ.get("BENCH_POSTGRES_URL"))
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument(
        "--poll",
        type=float,
        default=0.1,
        help="the worker's queue and message polling, s (default: the engine's, 0.1)",
    )
    parser.add_argument("--worker", nargs=3, metavar=("SPEC", "URL", "EXECUTOR"))
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of harnessc: measure the step overhead of both, side by side",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --baseline (default 3)")
    parser.add_argument("--steps-only", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--bytes", action="store_true", help="bytes per step of runs of --lengths steps"
    )
    parser.add_argument(
        "--lengths",
        type=lambda text: tuple(int(x) for x in text.split(",")),
        default=LENGTHS,
        help="the run lengths of --bytes, comma-separated (default 16,128,1024)",
    )
    parser.add_argument(
        "--shapes",
        type=lambda text: tuple(x for x in text.split(",") if x in SHAPES) or ("line",),
        default=tuple(SHAPES),
        help="the shapes of run --bytes measures, comma-separated (default line,fan)",
    )
    parser.add_argument("--bytes-only", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if args.steps_only:
        kind, spec = args.steps_only
        with tempfile.TemporaryDirectory() as tmp:
            measure_steps(kind, Path(spec), Path(tmp), args)
        return
    if args.bytes_only:
        kind, spec = args.bytes_only
        with tempfile.TemporaryDirectory() as tmp:
            measure_bytes(kind, Path(spec), Path(tmp), args)
        return
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    kinds = ["sqlite", "postgres"] if args.postgres else ["sqlite"]
    if args.only:
        kinds = [args.only]
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = compile_spec(Path(tmp), args.lengths)
        if args.bytes:
            bytes_table(kinds, spec_path, Path(tmp), args)
            return
        if args.baseline is not None:
            side_by_side(kinds, spec_path, Path(tmp), args)
            return
        for kind in kinds:
            # a child process per store kind: DBOS runs once per process
            code = _measure_in_child(kind, measure, spec_path, Path(tmp), args)
            if code:
                raise SystemExit(code)


def side_by_side(kinds: list[str], spec_path: Path, folder: Path, args: argparse.Namespace) -> None:
    """The step overhead of this tree and of `--baseline`, alternating, a process each."""
    old = importable(args.baseline.resolve(), folder / "baseline")
    trees: list[tuple[str, Path | None]] = [("baseline", old), ("this tree", None)]
    for kind in kinds:
        figures: dict[str, list[list[float]]] = {name: [] for name, _ in trees}
        columns = 6
        for n in range(args.rounds):
            for name, path in trees if n % 2 == 0 else trees[::-1]:
                env = dict(os.environ)
                if path is not None:
                    env["PYTHONPATH"] = str(path)
                command = [sys.executable, __file__, "--steps-only", kind, str(spec_path)]
                if args.postgres:
                    command += ["--postgres", args.postgres]
                # not a checkout's root, whose `harnessc/` would shadow the tree
                done = subprocess.run(
                    command, env=env, cwd=folder, capture_output=True, text=True, check=False
                )
                lines = [x for x in done.stdout.splitlines() if x.startswith("steps ")]
                if done.returncode or not lines:
                    raise SystemExit(f"{name}: the measurement failed\n{done.stderr[-2000:]}")
                row = [float(x) for x in lines[-1].split()[1:]]
                figures[name].append(row)
                load = os.getloadavg()[0]
                print(f"{kind:<8} round {n + 1} {name:<9}  {_row(row)}  load {load:.2f}")
        for name, _ in trees:
            row = [statistics.median(r[i] for r in figures[name]) for i in range(columns)]
            print(f"{kind:<8} median    {name:<9}  {_row(row)}")


def _row(row: list[float]) -> str:
    one, many, per_step, dbos, nth, branches = row
    return (
        f"1-step run {one:6.1f} ms  {STEPS}-step run {many:6.1f} ms  step {per_step:5.2f} ms  "
        f"DBOS's step {dbos:5.2f} ms  ratio {per_step / dbos:5.2f}  "
        f"16th step outside DBOS {nth:5.3f} ms  "
        f"{FAN_STEPS}-step branch-heavy run {branches:6.1f} ms"
    )


def _measure_in_child(
    kind: str, run: Any, spec_path: Path, folder: Path, args: argparse.Namespace
) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            run(kind, spec_path, folder, args)
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    main()
