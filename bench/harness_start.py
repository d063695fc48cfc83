"""`Harness` from a build against spec size: T = 50, 500, 5,000 tools, cold processes.

    .venv/bin/python bench/harness_start.py [--sizes 50,500,5000] [--runs 5]
                                            [--baseline CHECKOUT]

The spec is bench/check_scale.py's (T tools, about 1.5 T rules), built once per size with
`harnessc build --no-embed`. Each measurement is a fresh process that imports the package and
calls its `load()` (an in-memory store), as a service restarting does; it then decides one call
(the first decision compiles that tool's decider) and builds the exposure index (the first
`expose`). Columns, each the median of `--runs` processes:

- `import s`: importing the package (the interpreter's start-up is not counted);
- `Harness s`: `load()`, the model read into a `Harness` ready to judge;
- `first s`: the first decision; `index s`: the first exposure's index (lexical: no model to
  load without embeddings; with them the shipped matrix loads beside it, and the query model
  loads on the first query that needs it, reported by bench/exposure.py).

Rows: `new` is this tree's package `load()` (the build's seal of model.json: the content hash is
not recomputed); `unsealed` this tree without the seal (`Harness.from_json(model.json)`, what
`load()` did before); `base` the same in `--baseline CHECKOUT` (a git worktree of main, with
this interpreter), side by side in one run, the trees alternating process by process. Then the
split of `Harness(...)` into its phases, timed one by one in fresh processes (median of the
runs), each with the collector paused as `Harness.from_json` pauses it (`collection_paused`):
`validate` (`Spec.from_json`), `hash` (the content hash: the seal's, or computed), `engine`
(`PolicyEngine`), `normalizer` (tool names and argument validators), `availability` (the
`requires` checker), then `index` and `first` as above.

Target (issue 39): `Harness` from a build at T = 5,000 ≤ 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_scale import CLI, generate, importable

ROOT = Path(__file__).resolve().parent.parent

# One measurement: argv = out folder, package, mode ("new": the package's load(); "unsealed":
# Harness.from_json without the seal), policy, a tool id.
START = r"""
import importlib, json, sys, time
out, name, mode, policy, tool = sys.argv[1:6]
started = time.perf_counter()
sys.path.insert(0, out)
from harnessc.runtime import CallContext, Harness, open_store
package = importlib.import_module(name) if mode == "new" else None
imported = time.perf_counter()
if package is not None:
    harness = package.load(store="memory://")
else:
    harness = Harness.from_json(f"{out}/{name}/model.json", store=open_store("memory://"))
loaded = time.perf_counter()
call = CallContext(tool, {"path": "/repo/a", "env": "staging"}, actor={"role": "sre"})
effect = harness.engine.decider(policy).decide(call).effect
decided = time.perf_counter()
harness.exposure_index()
indexed = time.perf_counter()
print(json.dumps({"import": imported - started, "Harness": loaded - imported,
                  "first": decided - loaded, "index": indexed - decided, "effect": effect}))
"""

# The phases of `Harness.load`, one by one, with the same arguments as START.
PHASES = r"""
import importlib, json, sys, time
out, name, mode, policy, tool = sys.argv[1:6]
sys.path.insert(0, out)
from harnessc.runtime import CallContext, PolicyEngine, Spec
from harnessc.runtime.exposure.ranker import ExposureIndex
from harnessc.runtime.judge.availability import AvailabilityChecker
from harnessc.runtime.judge.normalize import ToolNames, Validator
from harnessc.runtime.model import PUBLIC_KINDS, build_models
try:  # as Harness.load runs its phases (the baseline has no pause)
    from harnessc.runtime.model import collection_paused
except ImportError:
    from contextlib import nullcontext as collection_paused
build_models()
data = open(f"{out}/{name}/model.json", "rb").read()
seal = importlib.import_module(name).MODEL_SEAL if mode == "new" else None
times = {}
def timed(label, work):
    started = time.perf_counter()
    with collection_paused():
        value = work()
    times[label] = time.perf_counter() - started
    return value
spec = timed("validate", lambda: Spec.from_json(data, seal) if seal else Spec.from_json(data))
timed("hash", spec.content_hash)
engine = timed("engine", lambda: PolicyEngine(spec))
timed("normalizer", lambda: (ToolNames(spec, {}),
                             {t.id: Validator(t.input) for t in spec.tools.values()}))
timed("availability", lambda: AvailabilityChecker(spec))
public = [t for t in spec.tools.values() if t.kind in PUBLIC_KINDS | {"private"}]
timed("index", lambda: ExposureIndex.from_tools(public))
call = CallContext(tool, {"path": "/repo/a", "env": "staging"}, actor={"role": "sre"})
timed("first", lambda: engine.decider(policy).decide(call))
print(json.dumps(times))
"""

COLUMNS = ("import", "Harness", "first", "index")
PHASE_COLUMNS = ("validate", "hash", "engine", "normalizer", "availability", "index", "first")


def build(n: int, root: Path) -> Path:
    """The package of the size-`n` spec, built by this tree's `harnessc build`."""
    spec = root / f"scale{n}.harness"
    spec.write_text(generate(n), encoding="utf-8")
    out = root / f"out{n}"
    command = [sys.executable, "-c", CLI, "build", str(spec), "-o", str(out)]
    done = subprocess.run(
        [*command, "--no-embed", "-q", "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if done.returncode != 0:
        raise SystemExit(f"build failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return out


def run_once(script: str, out: Path, mode: str, pythonpath: Path | None) -> dict[str, float]:
    """The times one fresh process prints."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed harnessc has its bytecode
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", script, str(out), "gen", mode, "gen", "g0.t0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,  # not a checkout's root, whose `harnessc/` would shadow the tree
    )
    if done.returncode != 0:
        raise SystemExit(f"measurement failed:\n{done.stderr[-2000:]}")
    times = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: v for k, v in times.items() if isinstance(v, float)}


def measure(
    script: str, out: Path, trees: list[tuple[str, str, Path | None]], runs: int
) -> dict[str, dict[str, float]]:
    """Per tree, the median over `runs` fresh processes of each time the script prints; the
    trees alternate run by run, so a change in the machine's load falls on all of them."""
    samples: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in trees}
    for _ in range(runs):
        for label, mode, pythonpath in trees:
            samples[label].append(run_once(script, out, mode, pythonpath))
    return {
        label: {key: statistics.median(s[key] for s in got) for key in got[0]}
        for label, got in samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--runs", type=int, default=5, help="processes per measurement")
    parser.add_argument("--baseline", type=Path, help="another checkout of harnessc to time too")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("", encoding="utf-8")  # the specs' project root
        base = None
        if args.baseline is not None:
            base = importable(args.baseline.resolve(), root / "baseline")
        rows: list[tuple[int, str, dict[str, float]]] = []
        phases: list[tuple[int, str, dict[str, float]]] = []
        for n in sizes:
            out = build(n, root)
            trees: list[tuple[str, str, Path | None]] = [("new", "new", None)]
            trees.append(("unsealed", "unsealed", None))
            if base is not None:
                trees.append(("base", "unsealed", base))
            for label, times in measure(START, out, trees, args.runs).items():
                rows.append((n, label, times))
            for label, times in measure(PHASES, out, trees[:1] + trees[2:], args.runs).items():
                phases.append((n, label, times))
            print(f"T={n}: measured", file=sys.stderr, flush=True)
        header = f"{'T':>6} {'tree':>9} " + " ".join(f"{c + ' s':>10}" for c in COLUMNS)
        print(header)
        print("-" * len(header))
        for n, label, times in rows:
            print(f"{n:>6} {label:>9} " + " ".join(f"{times[c]:>10.3f}" for c in COLUMNS))
        print()
        header = f"{'T':>6} {'tree':>9} " + " ".join(f"{c:>12}" for c in PHASE_COLUMNS)
        print(header)
        print("-" * len(header))
        for n, label, times in phases:
            print(f"{n:>6} {label:>9} " + " ".join(f"{times[c]:>12.3f}" for c in PHASE_COLUMNS))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average (1, 5, 15 min): {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
