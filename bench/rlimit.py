"""The z3 resource budget of one query (`HARNESSC_QUERY_RLIMIT`): what real queries need.

    .venv/bin/python bench/rlimit.py [--rlimit N] [--extra FILE ...] [--compare]

Runs the policy analysis (`harnessc lint`) over every spec of the repository (examples, the
standard library, tests/scenarios, tests/fixtures, tests/review, tests/diagnostics, the fuzz
corpus, bench/rlimit_paths.harness) and each FILE given (the realistic 50-tool policy:
`--extra realistic-50-tools.harness`), and `harnessc diff` over the review pairs
(tests/review), on an empty analysis cache, with every z3 `check` recorded: the resource units
it used (the change of z3's `rlimit count`), its CPU time (z3 runs in the calling thread: about
the time it would take on an idle machine), and its answer. Prints, per source, the number of
queries and the distribution of their units (median, p90, p99 by nearest rank, max) and the
longest CPU time, then the units per CPU second of the heaviest queries, which turn a budget in
units into seconds on this machine. `--rlimit N` runs under that budget (default 0: none, what
calibration needs).

`--compare` lints each spec twice, under the default budget (`DEFAULT_RLIMIT`) and with none,
prints whether the findings are the same, and exits 1 when a spec's differ: the default must
take away no answer a real spec needs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SLOW_CASE = "L006-undecided.harness"

records: list[tuple[str, int, float, str]] = []
"""(source, units, CPU seconds, answer) of every z3 check."""
current = ["?"]


def _instrument() -> None:
    import z3

    plain = z3.Solver.check

    def check(self: Any, *assumptions: Any) -> Any:
        before = self.statistics().get_key_value("rlimit count")
        start = time.process_time()  # z3 runs in this thread: its CPU time, not the load's
        result = plain(self, *assumptions)
        took = time.process_time() - start
        used = self.statistics().get_key_value("rlimit count") - before
        records.append((current[0], used, took, str(result)))
        return result

    z3.Solver.check = check  # type: ignore[method-assign]


def _specs(extra: list[str]) -> list[Path]:
    folders = ["examples", "stdlib", "tests/scenarios", "tests/fixtures", "tests/review"]
    folders += ["tests/diagnostics/cases", "tests/fuzz/corpus"]
    found = [p for f in folders for p in sorted((ROOT / f).rglob("*.harness"))]
    return [*found, ROOT / "bench" / "rlimit_paths.harness", *(Path(e) for e in extra)]


def _findings(path: Path) -> list[tuple[str, str, int]]:
    from harnessc.compiler import pipeline

    result = pipeline.lint([path])
    return sorted(
        (d.code, d.message, d.primary.span.line if d.primary else 0) for d in result.diagnostics
    )


def _quiet(argv: list[str]) -> None:
    from harnessc.compiler.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(argv)


def _group(path: Path) -> str:
    if not path.resolve().is_relative_to(ROOT) or path.parent.name == "bench":
        return path.name
    if path.name == SLOW_CASE:
        return "L006 case"
    parts = path.resolve().relative_to(ROOT).parts
    return "/".join(parts[:2]) if parts[0] == "tests" else parts[0]


def measure(extra: list[str], rlimit: int) -> None:
    os.environ["HARNESSC_QUERY_RLIMIT"] = str(rlimit)
    _instrument()
    for path in _specs(extra):
        current[0] = _group(path)
        _findings(path)
    current[0] = "diff tests/review"
    for old in sorted((ROOT / "tests/review").glob("*old.harness")):
        new = old.with_name(old.name.replace("old", "new"))
        _quiet(["diff", str(old), str(new), "--format", "json"])
    groups: dict[str, list[tuple[int, float, str]]] = {}
    for source, used, took, answer in records:
        groups.setdefault(source, []).append((used, took, answer))
        groups.setdefault("all real queries", []).append((used, took, answer))
    print(f"budget: {rlimit or 'none'}; z3 checks: {len(records)}")
    header = "source", "queries", "median", "p90", "p99", "max", "max cpu s", "unknown"
    print("{:<28} {:>7} {:>9} {:>9} {:>10} {:>11} {:>9} {:>7}".format(*header))
    for source in sorted(groups, key=lambda s: (s == "all real queries", s)):
        if source == "all real queries":
            rows = [r for s, *r in records if not s.startswith("L006")]
        else:
            rows = [tuple(r) for r in groups[source]]  # type: ignore[misc]
        units = sorted(r[0] for r in rows)
        if not units:
            continue

        def rank(q: float, units: list[int] = units) -> int:
            return units[min(len(units) - 1, int(q * len(units)))]

        print(
            f"{source:<28} {len(units):>7} {statistics.median(units):>9.0f} {rank(0.9):>9} "
            f"{rank(0.99):>10} {units[-1]:>11} {max(r[1] for r in rows):>9.3f} "
            f"{sum(r[2] == 'unknown' for r in rows):>7}"
        )
    heavy = sorted((r for r in records if r[2] > 0.05), key=lambda r: -r[1])[:12]
    print("units per CPU second of the heaviest queries (over 50 ms):")
    for source, used, took, answer in heavy:
        print(f"  {source:<28} {used:>11} units {took:>7.3f} s {used / took:>12,.0f}/s {answer}")


def compare(extra: list[str]) -> int:
    from harnessc.compiler.analysis.budget import DEFAULT_RLIMIT

    differ = 0
    for path in _specs(extra):
        os.environ["HARNESSC_QUERY_RLIMIT"] = str(DEFAULT_RLIMIT)
        start = time.perf_counter()
        bounded = _findings(path)
        middle = time.perf_counter()
        os.environ["HARNESSC_QUERY_RLIMIT"] = "0"
        free = _findings(path)
        end = time.perf_counter()
        same = "same" if bounded == free else "DIFFERENT"
        differ += bounded != free
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(
            f"{same:<9} {len(bounded):>4} findings  default {middle - start:6.2f} s  "
            f"none {end - middle:6.2f} s  {shown}"
        )
    print(f"{differ} spec(s) with different findings")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rlimit", type=int, default=0)
    parser.add_argument("--extra", nargs="*", default=[])
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    # an empty analysis cache: every partition is solved
    os.environ["HARNESSC_CACHE_DIR"] = tempfile.mkdtemp(prefix="harnessc-rlimit-")
    os.environ["HARNESSC_NO_CACHE"] = "1"
    if args.compare:
        return compare(args.extra)
    measure(args.extra, args.rlimit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
