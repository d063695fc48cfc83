"""`harnessc check` end to end against policy size: T tools, about 1.5 T rules, cold and warm.

    .venv/bin/python bench/check_scale.py [--sizes 50,500,5000] [--baseline CHECKOUT]
                                          [--cold-parser] [--limit 900]
                                          [--shape bench|realistic|session] [--fixture]

The spec is the policy benchmark's (`bench/decide.py spec_text`: tools `gG.tI` in groups of
ten; an ALLOW per tool over `args.path within "/repo"`, every other one also over the actor's
role; an ASK on 0.4 T tools over `args.env`; a DENY per group by the glob `gG.*` over
`resource.tenant != actor.tenant`), with the tools' risk cycling through low, medium, high and
critical, and four rules first that select by risk (`risk >= critical`, `risk == high`,
`risk <= low`) and by `*`, over arguments and the actor.

Each measurement is a fresh process that runs the pipeline's `check` on the file (parse →
resolve → lower → validate → analyse, what `harnessc check` runs), so interpreter start-up and
imports count as they do for a user. `cold`: an empty analysis cache (the parser's tables are
cached, as after any first run; `--cold-parser` empties both); `warm`: a second run of the
unchanged spec on the cache the cold run left; `cli s`: then `harnessc check` itself, which
answers an unchanged spec from its stored result (compiler/result_cache.py) without compiling
at all. `queries` are the SMT queries of the cold run and `decided` the questions it answered
without z3 (compiler/analysis/cells.py) — the analysis's work, independent of the machine's
load; `hits` are the analysis cache's hits in the warm run, `cold z3` whether the cold run
loaded z3 (a warm run never does). `--baseline CHECKOUT` times another checkout of harnessc
(a git worktree of an older commit) with this interpreter, side by side, and prints its cold
run's CPU, queries and questions without z3 as well (`old cpu s`, …); `--limit` stops a
measurement that takes longer (shown as `>limit`).

`--shape realistic` generates specs shaped like real policy sets instead (bench/realistic.py:
path prefixes and suffixes, URL prefixes, tenant checks, enums, numeric bounds, a field-to-field
comparison, role allows, the standard library's guardrails imported); `--shape session` adds
session terms (provenance, a count, a sum). `--fixture` measures
tests/fixtures/realistic_50_tools.harness (50 tools, 80 rules) first. `cpu s` is the cold
run's CPU time (user + system, the child process's own): the machine's load shows in the wall
time far more than in it.

Targets: T=50 ≤ 0.5 s, T=500 ≤ 3 s, T=5,000 ≤ 20 s, a warm run ≤ 0.5 s; realistic specs and
the fixture, cold: T=50 ≤ 1 s, T=500 ≤ 3 s, T=5,000 ≤ 20 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decide import spec_text
from realistic import realistic_spec

RISKS = ("low", "medium", "high", "critical")
EXTRA_RULES = (
    'deny risk >= critical when not actor.role == "sre" { reason "critical tools are for SREs" }',
    'ask risk == high when args.env == "production" '
    '{ approver role "owner"; reason "high risk in production" }',
    'deny * when args has n and args.n > 1000 { reason "at most 1,000 items at once" }',
    'allow risk <= low when args.env == "staging"',
)

# What a user's `harnessc check` runs, plus the analysis's counters on standard output.
DRIVER = """
import json, sys
from harnessc.compiler.pipeline import check
result = check([sys.argv[1]])
if not result.ok:
    sys.exit("the bench spec has errors: " + "; ".join(d.message for d in result.diagnostics[:3]))
a = result.analysis
print(json.dumps({"queries": getattr(a, "queries", 0), "hits": getattr(a, "cache_hits", 0),
                  "decided": getattr(a, "decided", 0), "z3": "z3" in sys.modules}))
"""
CLI = "import sys; from harnessc.compiler.cli import main; sys.exit(main(sys.argv[1:]))"
PACKAGES = {"dsl": "dsl", "compiler": "compiler", "runtime": "runtime", "stdlib": "stdlib"}


FIXTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "realistic_50_tools.harness"
)


def generate(n: int, shape: str = "bench") -> str:
    """The spec of `n` tools (module docstring)."""
    if shape == "realistic":
        return realistic_spec(n)
    if shape == "session":
        return realistic_spec(n, session=True)
    return spec_text(n, risk=lambda i: RISKS[i % len(RISKS)], extra=EXTRA_RULES)


def rule_count(n: int) -> int:
    return len(EXTRA_RULES) + n + n * 4 // 10 + (n + 9) // 10


@dataclass
class Timing:
    seconds: float | None  # None: over the limit
    cpu: float = 0.0
    queries: int = 0
    hits: int = 0
    decided: int = 0
    z3: bool = False

    def text(self, limit: float) -> str:
        return f">{limit:.0f}" if self.seconds is None else f"{self.seconds:.2f}"


def importable(checkout: Path, into: Path) -> Path:
    """A folder from which `import harnessc` loads `checkout` (laid out as pyproject maps it)."""
    package = into / "harnessc"
    package.mkdir(parents=True)
    (package / "__init__.py").symlink_to(checkout / "harnessc" / "__init__.py")
    for name, folder in PACKAGES.items():
        (package / name).symlink_to(checkout / folder)
    return into


def run_check(
    path: Path, cache: Path, limit: float, pythonpath: Path | None, cli: bool = False
) -> Timing:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("HARNESSC_CACHE_DIR", None)
    # an installed harnessc has its bytecode: the warm-up run writes it, as installing does
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [CLI, "check", "-q", str(path)] if cli else [DRIVER, str(path)]
    start = time.perf_counter()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(
            [sys.executable, "-c", *command],
            env=env,
            cwd=path.parent,  # not a checkout's root, whose `harnessc/` would shadow the tree
            capture_output=True,
            text=True,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return Timing(None)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"check failed:\n{done.stderr[-2000:]}")
    if cli:
        return Timing(seconds, cpu)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return Timing(seconds, cpu, data["queries"], data["hits"], data.get("decided", 0), data["z3"])


def fresh_cache(folder: Path, keep_parser: bool) -> Path:
    """`folder` as an empty cache, but for the parser's tables when `keep_parser`.

    The folder stays where it is: Lark keys its cached tables by the file's own path as well as
    by the grammar, so tables copied into another folder would be built again.
    """
    own = folder / "harnessc"
    if own.exists():
        for item in own.iterdir():
            if keep_parser and item.name == "parser.lark-cache":
                continue
            if item.is_dir():
                shutil.rmtree(item)
            else:
                item.unlink()
    return folder


def _old_columns(cold: Timing) -> str:
    """The baseline's cold run: its CPU, z3 queries and questions answered without z3 (blank
    when it ran past the limit)."""
    if cold.seconds is None:
        return f" {'-':>9} {'-':>11} {'-':>11}"
    return f" {cold.cpu:>9.2f} {cold.queries:>11} {cold.decided:>11}"


def plot(
    rows: list[tuple[int | str, dict[str, Timing]]], limit: float, width: int = 60
) -> list[str]:
    """Seconds against T as horizontal bars on a log scale (10 ms to the limit)."""
    low, high = math.log10(0.01), math.log10(limit)
    out = [f"{'':>16} |{'0.01 s':<{width // 2}}{f'{limit:.0f} s (log scale)':>{width // 2}}|"]
    for n, timings in rows:
        for label, timing in timings.items():
            seconds = timing.seconds if timing.seconds is not None else limit
            filled = round((math.log10(max(seconds, 0.01)) - low) / (high - low) * width)
            bar = "#" * max(filled, 1)
            out.append(f"{f'T={n} {label}':>16} |{bar:<{width}}| {timing.text(limit)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--baseline", type=Path, help="another checkout of harnessc to time too")
    parser.add_argument("--cold-parser", action="store_true", help="no parser cache when cold")
    parser.add_argument("--limit", type=float, default=900.0, help="seconds per measurement")
    parser.add_argument("--shape", choices=("bench", "realistic", "session"), default="bench")
    parser.add_argument("--fixture", action="store_true", help="the realistic fixture first")
    args = parser.parse_args(argv)
    sizes: list[int | str] = [int(x) for x in args.sizes.split(",") if x]
    if args.fixture:
        sizes.insert(0, "fixture")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trees: dict[str, Path | None] = {"": None}
        if args.baseline is not None:
            trees = {"old ": importable(args.baseline.resolve(), root / "old"), "": None}
        caches: dict[str, Path] = {}
        for name, pythonpath in trees.items():
            # one run on a small spec fills the parser's cache, kept by each cold run
            caches[name] = root / f"cache{len(caches)}"
            warmup = root / f"warmup{len(caches)}"
            warmup.mkdir()
            small = warmup / "small.harness"
            small.write_text(generate(10), encoding="utf-8")
            run_check(small, caches[name], args.limit, pythonpath)

        old = "old " in trees
        header = (
            f"{'T':>6} {'rules':>6} {'lines':>7} "
            + " ".join(f"{name + 'cold s':>11} {name + 'warm s':>11}" for name in trees)
            + (f" {'old cpu s':>9} {'old queries':>11} {'old decided':>11}" if old else "")
            + f" {'cpu s':>6} {'cli s':>7} {'queries':>8} {'decided':>8} {'hits':>6} {'cold z3':>8}"
        )
        print(header)
        print("-" * len(header))
        rows: list[tuple[int | str, dict[str, Timing]]] = []
        for n in sizes:
            text = (
                FIXTURE.read_text(encoding="utf-8") if n == "fixture" else generate(n, args.shape)
            )
            path = root / f"scale{n}.harness"
            path.write_text(text, encoding="utf-8")
            timings: dict[str, Timing] = {}
            for name, pythonpath in trees.items():
                cache = fresh_cache(caches[name], not args.cold_parser)
                timings[name + "cold"] = run_check(path, cache, args.limit, pythonpath)
                timings[name + "warm"] = run_check(path, cache, args.limit, pythonpath)
            cold, warm = timings["cold"], timings["warm"]
            # the current tree's cache (the last one): the first run stores the result
            run_check(path, cache, args.limit, None, cli=True)
            cli = run_check(path, cache, args.limit, None, cli=True)
            z3 = "yes" if cold.z3 else "no"
            rules = (
                text.count(" when ")
                if isinstance(n, str) or args.shape != "bench"
                else rule_count(n)
            )
            print(
                f"{n:>6} {rules:>6} {text.count(chr(10)):>7} "
                + " ".join(f"{t.text(args.limit):>11}" for t in timings.values())
                + (_old_columns(timings["old cold"]) if old else "")
                + f" {cold.cpu:>6.2f} {cli.text(args.limit):>7} {cold.queries:>8} {cold.decided:>8}"
                + f" {warm.hits:>6} {z3:>8}",
                flush=True,
            )
            rows.append((n, timings))
        print()
        print("\n".join(plot(rows, args.limit)))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average (1, 5, 15 min): {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
