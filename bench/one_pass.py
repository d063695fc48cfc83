"""`harnessc check` of a spec with mistakes against the same spec without: the cost of one pass.

    .venv/bin/python bench/one_pass.py [--sizes 100,1000,5000] [--repeat 3]

For each size the generated spec of bench/check.py is checked as written (clean: every stage
runs, the policy analysis included) and with four independent mistakes in four declarations:
a syntax error in one tool's block, a misspelt effect in another tool, a misspelt type in a
third, and an unknown tool in a policy rule. With mistakes, resolve runs on what parsed, every
stage sets aside what it finds wrong (and what depends on it) and lowers the rest again; the
policy analysis does not run. The table gives the best wall time of --repeat runs, the errors
reported (each mistake once: 4), and the declarations the parser skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from harnessc.compiler import pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check import generate, tool_id


def with_mistakes(text: str, n_tools: int) -> str:
    """The spec with four mistakes, each in a declaration of its own."""
    edits = [
        (tool_id(1), "  version ", "  version = "),  # a syntax error
        (tool_id(n_tools // 2), "effects write reversible", "effects write reversable"),
        (tool_id(n_tools - 2), "job_id: string", "job_id: strng"),  # an unknown type
    ]
    for tool, old, new in edits:
        start = text.index(f"tool {tool} {{")
        at = text.index(old, start)
        text = text[:at] + new + text[at + len(old) :]
    # an unknown tool, in a policy of its own so that the other rules stay checked
    return text + f"\npolicy extra {{\n  default deny\n  allow {tool_id(3)}_nosuch\n}}\n"


def best(path: Path, repeat: int) -> tuple[float, pipeline.CheckResult]:
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = pipeline.check([path])
        times.append(time.perf_counter() - start)
    assert result is not None
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'tools':>6} {'clean s':>8} {'mistakes s':>10} {'errors':>6} {'skipped':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            text = generate(size)
            clean = Path(tmp) / f"clean{size}.harness"
            clean.write_text(text, encoding="utf-8")
            broken = Path(tmp) / f"broken{size}.harness"
            broken.write_text(with_mistakes(text, size), encoding="utf-8")
            clean_s, clean_result = best(clean, args.repeat)
            assert clean_result.ok, [d.message for d in clean_result.diagnostics][:3]
            broken_s, result = best(broken, args.repeat)
            errors = sum(d.severity == "error" for d in result.diagnostics)
            skipped = sum(len(f.module.broken) for f in result.files if f.module is not None)
            print(f"{size:>6} {clean_s:>8.2f} {broken_s:>10.2f} {errors:>6} {skipped:>7}")
    print("load average (1, 5, 15 min):", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
