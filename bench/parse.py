"""Parse and resolve cost against spec size: 100, 1,000 and 10,000 tools with as many rules.

    .venv/bin/python bench/parse.py [--sizes 100,1000,10000] [--repeat 3]

Prints, per size: lines, parse time (read + parse + lower to the syntax tree; best of
--repeat), parse lines per second, resolve time, parse+resolve lines per second, microseconds
per line, and the peak traced memory of one parse+resolve. The cost should grow linearly with
the spec: the microseconds-per-line column should stay flat.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from harnessc.compiler import pipeline, resolve


def generate(n_tools: int) -> str:
    """A dense, realistic spec: n tools with schemas and availability, and n policy rules."""
    out = [
        'harness bench {\n  version "1.0.0"\n  summary "Generated benchmark spec."\n}\n\n',
        'import std.risk\n\nconnection github "GitHub account"\n',
        "fact workspace.open: bool\n\n",
    ]
    for i in range(n_tools):
        out.append(
            f"tool svc{i}.action {{\n"
            f"  version 2\n"
            f'  summary "Run action {i} on the service."\n'
            f'  use_when "The user asks for action {i}."\n'
            f"  effects write reversible\n"
            f"  risk medium\n"
            f"  timeout 30s\n"
            f"  input {{\n"
            f'    service: string pattern "^[a-z0-9-]+$"\n'
            f"    count: int min 1 max 10\n"
            f"    refs: list<string> min 1\n"
            f"    ticket: string?\n"
            f"  }}\n"
            f"  requires connected(github) and workspace.open\n"
            f"}}\n\n"
        )
    out.append("policy bench {\n  default std.risk.defaults\n  include std.risk.guardrails\n")
    for i in range(n_tools):
        out.append(
            f'  r{i}: allow svc{i}.action when actor.role in ["engineer", "sre"] '
            f"and args.count <= 5\n"
        )
    out.append("}\n")
    return "".join(out)


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]

    def parse_and_resolve(path: Path) -> None:
        with pipeline.paused_gc():
            loaded = pipeline.load_file(path, str(path))
            resolution = resolve.resolve_program([loaded], pipeline.load_file)
        if resolution.diagnostics:
            raise SystemExit(f"bench spec has errors: {resolution.diagnostics[:3]}")

    def parse_only(path: Path) -> None:
        with pipeline.paused_gc():
            pipeline.load_file(path, str(path))

    header = (
        f"{'tools':>7} {'lines':>8} {'parse s':>9} {'parse l/s':>10} {'resolve s':>10} "
        f"{'total l/s':>10} {'us/line':>8} {'peak MiB':>9}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            text = generate(n)
            lines = text.count("\n")
            path = Path(tmp) / f"bench{n}.harness"
            path.write_text(text, encoding="utf-8")
            if n == sizes[0]:
                parse_and_resolve(path)  # build the parser tables and load std.risk once
            parse_s = best_of(args.repeat, lambda path=path: parse_only(path))
            total_s = best_of(args.repeat, lambda path=path: parse_and_resolve(path))
            tracemalloc.start()
            parse_and_resolve(path)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(
                f"{n:>7} {lines:>8} {parse_s:>9.3f} {lines / parse_s:>10.0f} "
                f"{total_s - parse_s:>10.3f} {lines / total_s:>10.0f} "
                f"{total_s / lines * 1e6:>8.1f} {peak / 2**20:>9.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
