"""Start-up cost of the command line: what a pre-commit hook or an editor pays per run.

    .venv/bin/python bench/startup.py [--rounds 7] [--baseline CHECKOUT]

Each case is a fresh `harnessc` process, as a user starts it, timed from spawn to exit; the
cases take turns within each round, so a change in the machine's load hits them alike. Printed:
the median and the best of the rounds, each median as a multiple of `python -c pass` on the
same interpreter (the floor no command can go under), and the median CPU time of the process
(user + system: on a busy machine it varies much less than the time to exit). Cases, for each
example spec:

- `--version`: the command line alone (target: 150 ms);
- `check`, cold: an empty cache folder, so the parser's tables are built, every stage runs and
  the policy analysis solves every query;
- `check --no-cache`: the parser's tables and the analysis's results are cached, the result is
  not, so every stage runs (the first check after an edit to the spec);
- `check`, stored: the run is answered from its stored result (an unchanged spec; target for
  the remediation example: 400 ms).

`--baseline CHECKOUT` times another checkout of harnessc (a git worktree of an older commit) with
this interpreter in the same rounds, its cases marked `before:` (one that predates the stored
results has no `--no-cache`: its `check` compiles every time, and runs without the option).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_scale import importable

ROOT = Path(__file__).resolve().parent.parent
HARNESSC = [sys.executable, "-m", "harnessc.compiler"]
EXAMPLES = {
    "remediation": ["examples/remediation/remediation.harness"],
    "workspace": ["examples/workspace-agent/workspace.harness"],
}


def timed(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """Seconds from spawn to exit, and the CPU seconds the process used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT")
    opts = parser.parse_args()
    for files in EXAMPLES.values():
        for name in files:
            if not (ROOT / name).is_file():
                sys.exit(f"missing example {name}")
    warm_home = tempfile.mkdtemp(prefix="harnessc-bench-")
    warm = {**os.environ, "XDG_CACHE_HOME": warm_home}
    warm.pop("HARNESSC_NO_CACHE", None)
    # an installed harnessc has its bytecode: the warm-up runs write it, as installing does
    warm.pop("PYTHONDONTWRITEBYTECODE", None)
    cases: list[tuple[str, list[str], str]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], "warm"),
        ("harnessc --version", [*HARNESSC, "--version"], "warm"),
    ]
    for example, files in EXAMPLES.items():
        paths = [str(ROOT / f) for f in files]
        check = [*HARNESSC, "check", "-q"]
        cases += [
            (f"check {example}, cold", [*check, *paths], "cold"),
            (f"check {example}, --no-cache", [*check, "--no-cache", *paths], "warm"),
            (f"check {example}, stored", [*check, *paths], "warm"),
        ]
    old_tree = tempfile.mkdtemp(prefix="harnessc-bench-old-")
    if opts.baseline is not None:
        importable(opts.baseline.resolve(), Path(old_tree))
        # a checkout from before the stored results has no `--no-cache`: it compiles each time
        stores = "--no-cache" in (opts.baseline / "compiler" / "cli.py").read_text("utf-8")
        # the old checkout checks its own copy of each example (the language may have grown)
        here, there = str(ROOT), str(opts.baseline.resolve())
        cases += [
            (
                f"before: {label}",
                [
                    there + a[len(here) :] if a.endswith(".harness") and a.startswith(here) else a
                    for a in argv
                    if stores or a != "--no-cache"
                ],
                f"{kind}-old",
            )
            for label, argv, kind in cases[1:]
        ]
    old = {**warm, "PYTHONPATH": old_tree, "XDG_CACHE_HOME": tempfile.mkdtemp()}

    def one(argv: list[str], kind: str) -> tuple[float, float]:
        # the old checkout runs from a folder of its own: ROOT's `harnessc/` would shadow it
        env, cwd = (old, Path(old_tree)) if kind.endswith("-old") else (warm, ROOT)
        if kind.startswith("cold"):
            with tempfile.TemporaryDirectory(prefix="harnessc-bench-cold-") as empty:
                return timed(argv, {**env, "XDG_CACHE_HOME": empty}, cwd)
        return timed(argv, env, cwd)

    # fill the warm folders: parser tables, analysis results, stored results
    for _, argv, kind in cases:
        if kind.startswith("warm"):
            one(argv, kind)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    for _ in range(opts.rounds):
        for label, argv, kind in cases:
            elapsed, used = one(argv, kind)
            samples[label].append(elapsed)
            cpu[label].append(used)
    floor = statistics.median(samples["python -c pass"])
    print(f"harnessc start-up, {opts.rounds} rounds; load average {os.getloadavg()}")
    print(f"{'case':<44} {'median ms':>10} {'best ms':>8} {'x python':>9} {'cpu ms':>7}")
    for label, values in samples.items():
        median = statistics.median(values)
        used = statistics.median(cpu[label])
        print(
            f"{label:<44} {median * 1e3:>10.0f} {min(values) * 1e3:>8.0f} {median / floor:>9.1f}"
            f" {used * 1e3:>7.0f}"
        )


if __name__ == "__main__":
    main()
