"""`check` just under and just over each limit of a spec (dsl/files.py).

    .venv/bin/python bench/limits.py [--only NAME,...] [--ceiling 300]

Each case is a generated spec checked in a fresh process by the pipeline's `check` (what
`harnessc check --no-cache` runs): `parse s` is reading and parsing the file (for a spec over a
limit, up to where the parse stopped), `check s` the whole run, `after parse ms` what the run
spent once the parse was done (for a spec over a limit: from the refusal to the answer, which
must stay under 50 ms), `process s` the process from start to exit, imports included, and
`codes` what it reported. `--ceiling` stops a process that takes longer (shown as `>N`).

The cases:

- `rules-under`, `rules-over`: 49,999 and 50,001 rules without a condition over 1,000 tools
  (H010 at rule 50,001); `rules-100k`: the 100,000 rules of the report that was still being
  checked after 120 s;
- `nodes-under`, `nodes-over`: 33,333 rules `allow tK when args.n == I` over 1,000 tools
  (99,999 expression nodes) and one rule more (H011 at node 100,001);
- `condition-under`, `condition-over`: one rule whose condition is 3,333 comparisons joined by
  `and` (10,000 nodes) and 3,334 (H012); `ands-20k`: the report's rule of 20,000 `and`s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TOOLS = 1_000

DRIVER = """
import json, sys, time
started = time.perf_counter()
from harnessc.compiler import pipeline
from harnessc.dsl import parser
from harnessc.dsl.source import Source
parser.parse_source(Source("warm.harness", "connection c\\n"))  # the parser's tables, loaded
parsed = []
real = parser.parse_source
def timed(source):
    t = time.perf_counter()
    result = real(source)
    parsed.append(time.perf_counter() - t)
    return result
pipeline.parse_source = timed
imported = time.perf_counter()
result = pipeline.check([sys.argv[1]])
done = time.perf_counter()
print(json.dumps({"parse": sum(parsed), "check": done - imported,
                  "codes": sorted({d.code for d in result.diagnostics if d.severity == "error"})}))
"""


def tools(n: int = TOOLS) -> str:
    return "".join(
        f'tool t{i} {{\n  summary "T{i}."\n  use_when "T{i}."\n  effects read\n  risk low\n'
        "  input { n: int, flag: bool }\n}\n"
        for i in range(n)
    )


def rules_spec(n: int) -> str:
    body = "".join(f"  r{i}: allow t{i % TOOLS}\n" for i in range(n))
    return tools() + "policy p {\n  default deny\n" + body + "}\n"


def nodes_spec(n_rules: int) -> str:
    body = "".join(f"  r{i}: allow t{i % TOOLS} when args.n == {i}\n" for i in range(n_rules))
    return tools() + "policy p {\n  default deny\n" + body + "}\n"


def condition_spec(n: int) -> str:
    condition = " and ".join(f"args.n != {i}" for i in range(n))
    return tools(1) + f"policy p {{\n  default deny\n  allow t0 when {condition}\n}}\n"


CASES: dict[str, Callable[[], str]] = {
    "rules-under": lambda: rules_spec(49_999),
    "rules-over": lambda: rules_spec(50_001),
    "rules-100k": lambda: rules_spec(100_000),
    "nodes-under": lambda: nodes_spec(33_333),
    "nodes-over": lambda: nodes_spec(33_334),
    "condition-under": lambda: condition_spec(3_333),
    "condition-over": lambda: condition_spec(3_334),
    "ands-20k": lambda: condition_spec(20_000),
}


def measure(name: str, folder: Path, ceiling: float) -> str:
    path = folder / f"{name}.harness"
    path.write_text(CASES[name](), encoding="utf-8")
    size = path.stat().st_size / 1_048_576
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(path)],
            capture_output=True,
            text=True,
            timeout=ceiling,
            env={"HARNESSC_CACHE_DIR": str(folder / "cache"), "PATH": ""},
        )
    except subprocess.TimeoutExpired:
        return f"{name:<16} {size:5.1f} MiB  >{ceiling:.0f} s (stopped)"
    process = time.perf_counter() - started
    if done.returncode != 0 and not done.stdout:
        return f"{name:<16} failed: {done.stderr.strip().splitlines()[-1:]}"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    after = (found["check"] - found["parse"]) * 1000
    return (
        f"{name:<16} {size:5.1f} MiB  parse {found['parse']:6.2f} s  check {found['check']:6.2f} s"
        f"  after parse {after:8.1f} ms  process {process:6.2f} s  codes {found['codes']}"
    )


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--only", help="comma-separated case names")
    options.add_argument("--ceiling", type=float, default=300.0, help="seconds per process")
    args = options.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    with tempfile.TemporaryDirectory(prefix="harnessc-limits-") as folder:
        for name in names:
            print(measure(name, Path(folder), args.ceiling), flush=True)


if __name__ == "__main__":
    main()
