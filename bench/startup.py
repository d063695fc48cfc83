"""Start-up cost of the command line: what a pre-commit hook or an editor pays per run.

    .venv/bin/python bench/startup.py [--rounds 7]

Each case is a fresh `harnessc` process, as a user starts it, timed from spawn to exit; the
cases take turns within each round, so a change in the machine's load hits them alike. Printed:
the median and the best of the rounds, and each median as a multiple of `python -c pass` on the
same interpreter (the floor no command can go under). Cases, for each example spec:

- `--version`: the command line alone (target: 150 ms);
- `check`, cold: an empty cache folder, so the parser's tables are built, every stage runs and
  the policy analysis solves every query;
- `check --no-cache`: the parser's tables and the analysis's results are cached, the result is
  not, so every stage runs (the first check after an edit to the spec);
- `check`, stored: the run is answered from its stored result (an unchanged spec; target for
  the remediation example: 400 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESSC = [sys.executable, "-m", "harnessc.compiler"]
EXAMPLES = {
    "remediation": ["examples/remediation/remediation.harness"],
    "workspace": ["examples/workspace-agent/workspace.harness"],
}


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    opts = parser.parse_args()
    for files in EXAMPLES.values():
        for name in files:
            if not (ROOT / name).is_file():
                sys.exit(f"missing example {name}")
    warm_home = tempfile.mkdtemp(prefix="harnessc-bench-")
    warm = {**os.environ, "XDG_CACHE_HOME": warm_home}
    warm.pop("HARNESSC_NO_CACHE", None)
    cases: list[tuple[str, list[str], str]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], "warm"),
        ("harnessc --version", [*HARNESSC, "--version"], "warm"),
    ]
    for example, files in EXAMPLES.items():
        cases += [
            (f"check {example}, cold", [*HARNESSC, "check", "-q", *files], "cold"),
            (
                f"check {example}, --no-cache",
                [*HARNESSC, "check", "-q", "--no-cache", *files],
                "warm",
            ),
            (f"check {example}, stored", [*HARNESSC, "check", "-q", *files], "warm"),
        ]
    # fill the warm folder: parser tables, analysis results, stored results
    for _, argv, kind in cases:
        if kind == "warm":
            timed(argv, warm)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    for _ in range(opts.rounds):
        for label, argv, kind in cases:
            if kind == "cold":
                with tempfile.TemporaryDirectory(prefix="harnessc-bench-cold-") as empty:
                    samples[label].append(timed(argv, {**warm, "XDG_CACHE_HOME": empty}))
            else:
                samples[label].append(timed(argv, warm))
    floor = statistics.median(samples["python -c pass"])
    print(f"harnessc start-up, {opts.rounds} rounds; load average {os.getloadavg()}")
    print(f"{'case':<36} {'median ms':>10} {'best ms':>8} {'x python':>9}")
    for label, values in samples.items():
        median = statistics.median(values)
        print(f"{label:<36} {median * 1e3:>10.0f} {min(values) * 1e3:>8.0f} {median / floor:>9.1f}")


if __name__ == "__main__":
    main()
