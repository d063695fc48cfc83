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
  it, the run's state recorded), median of 300;
- workflows/s: `--runs` runs of 4 steps created at once, until the last one completes, with 1
  worker (this process) and with 3 worker processes sharing the queue;
- gate round trip: `decide` until the run has taken the decision and published it (median);
- waiting: the worker's resident memory and threads before and after `--waiting` runs wait at a
  gate (the interpreter is async: a waiting run holds no thread).

`--baseline CHECKOUT` (a checkout of another commit) measures only the step overhead, of this
tree and of that one side by side: `--rounds` rounds, each a process per tree and store kind,
the two trees alternating (which one goes first alternates too), and prints each round's
figures and their medians, with DBOS alone measured in every process.
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
REPEAT = 9
"""Runs of each length (and DBOS workflows) whose median latency makes the step overhead."""
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
workflow many {
  agent runner
  step s1 = call job.run(n: 1)
"""
    + "".join(f"  step s{i} = call job.run(n: {i}) after s{i - 1}\n" for i in range(2, STEPS + 1))
    + "}\n"
)
ACTOR = {"user": "bench", "role": "ops"}


def compile_spec(folder: Path) -> Path:
    from harnessc.compiler.pipeline import check

    source = folder / "bench.harness"
    source.write_text(SPEC, encoding="utf-8")
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
    the run's state it records (what a step does besides DBOS's checkpoint)."""
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
        print(f"steps {one:.3f} {many:.3f} {per_step:.4f} {dbos:.4f} {nth:.4f}", flush=True)
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
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if args.steps_only:
        kind, spec = args.steps_only
        with tempfile.TemporaryDirectory() as tmp:
            measure_steps(kind, Path(spec), Path(tmp), args)
        return
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    kinds = ["sqlite", "postgres"] if args.postgres else ["sqlite"]
    if args.only:
        kinds = [args.only]
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = compile_spec(Path(tmp))
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
        columns = 5
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
    one, many, per_step, dbos, nth = row
    return (
        f"1-step run {one:6.1f} ms  {STEPS}-step run {many:6.1f} ms  step {per_step:5.2f} ms  "
        f"DBOS's step {dbos:5.2f} ms  ratio {per_step / dbos:5.2f}  "
        f"16th step outside DBOS {nth:5.3f} ms"
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
