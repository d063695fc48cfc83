"""The semantic diff of two policies (compiler/analysis/compare.py) against policy size.

    .venv/bin/python bench/diff.py [--sizes 500,5000] [--kinds changed,added,removed]
                                   [--seed 7]

The spec is the policy benchmark's at T tools and about 1.5 T rules (`bench/check_scale.py
generate`: tools in groups of ten, an ALLOW per tool, an ASK on 0.4 T tools, a DENY per group,
four rules first that select by risk and by `*`). For each size and each kind, one random rule
of the policy is changed (its condition narrowed or widened, its effect, or an ASK's approver),
one rule is added, or one is removed, and `compare_specs` compares the two specs; `wildcard`,
the worst case, changes a rule every tool's bucket holds (`deny * when args has n and args.n >
1000`), so that every tool is compared and most calls of each change.

Each side is compiled by `check` in this process (parse → … → analyse, the first side on an
empty analysis cache, the second on what the first left: what a `harnessc diff` of a pull
request does), timed separately: `old s`, `new s`. `diff s` is the comparison itself (every
tool: skipped when its bucket is identical on both sides, else solved) with every witness
decided by the runtime under both specs; `skipped` the tools skipped without z3, `solved` the
tools compared, `queries` the SMT queries. Every region's witness must really flip under the
runtime (`verified`): the bench stops if one does not. A second comparison of the same pair
(`again s`) reads every solved tool back from the cache.

Targets (issue 17): the diff of T=500 ≤ 5 s, of T=5,000 ≤ 60 s.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_scale import generate
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.compare import Comparison, compare_specs
from harnessc.compiler.pipeline import check
from harnessc.runtime.model import Spec

RULE = re.compile(r"^  (\w+: )?(allow|ask|deny) ")


def mutate(text: str, kind: str, rng: random.Random) -> tuple[str, str]:
    """The spec with one rule changed, added or removed, and what was done."""
    lines = text.split("\n")
    rules = [i for i, line in enumerate(lines) if RULE.match(line)]
    i = rng.choice(rules)
    line = lines[i]
    if kind == "removed":
        del lines[i]
        return "\n".join(lines), f"removed `{line.strip()}`"
    if kind == "wildcard":  # the worst case: a rule in every tool's bucket
        return text.replace(
            "args.n > 1000", "args.n > 100"
        ), "changed `deny * when … args.n > 1000` to `> 100`"
    if kind == "added":
        tool = rng.choice(re.findall(r"^tool (\S+) \{", text, re.M))
        added = f'  added: allow {tool} when args.env == "staging" and args.n < 5'
        lines.insert(i, added)
        return "\n".join(lines), f"added `{added.strip()}`"
    if '"/repo"' in line:
        changed = line.replace('"/repo"', '"/repo/src"' if rng.random() < 0.5 else '"/"')
    elif "approver role" in line:
        changed = line.replace('role "owner"', 'role "release-manager"')
    elif line.lstrip().startswith(("deny_", "deny ")):
        changed = line.replace(" deny ", " ask ", 1).replace(
            "{ reason", '{ approver role "sre"; reason'
        )
    else:
        changed = line.replace(" allow ", " ask ", 1) + ' { approver role "owner" }'
    lines[i] = changed
    return "\n".join(lines), f"changed `{line.strip()}` to `{changed.strip()}`"


def compiled(path: Path) -> tuple[Spec, float]:
    start = time.perf_counter()
    result = check([path])
    seconds = time.perf_counter() - start
    if not result.ok or result.model is None:
        sys.exit(
            "the bench spec has errors: " + "; ".join(d.message for d in result.diagnostics[:3])
        )
    return result.model, seconds


def verified(comparison: Comparison) -> None:
    bad = [r for r in comparison.regions if not r.verified]
    if bad:
        r = bad[0]
        sys.exit(f"a witness does not flip under the runtime: {r.tool} {r.change}: {r.notes}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="500,5000")
    parser.add_argument("--kinds", default="changed,added,removed,wildcard")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    header = (
        f"{'T':>6} {'kind':>8} {'old s':>7} {'new s':>7} {'diff s':>7} {'again s':>8} "
        f"{'skipped':>8} {'solved':>7} {'queries':>8} {'regions':>8} {'widened':>8} "
        f"{'diff/target':>12}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HARNESSC_CACHE_DIR"] = tmp  # an empty analysis cache for the first side
        for n in (int(x) for x in args.sizes.split(",")):
            target = 5.0 if n <= 500 else 60.0
            text = generate(n)
            old_path = Path(tmp, f"old{n}.harness")
            old_path.write_text(text, encoding="utf-8")
            old, old_s = compiled(old_path)
            for kind in args.kinds.split(","):
                new_text, what = mutate(text, kind, rng)
                new_path = Path(tmp, f"new{n}-{kind}.harness")
                new_path.write_text(new_text, encoding="utf-8")
                new, new_s = compiled(new_path)
                cache = AnalysisCache(on_disk=False)
                start = time.perf_counter()
                comparison = compare_specs(old, new, cache=cache)
                diff_s = time.perf_counter() - start
                verified(comparison)
                start = time.perf_counter()
                compare_specs(old, new, cache=cache)
                again_s = time.perf_counter() - start
                print(
                    f"{n:>6} {kind:>8} {old_s:>7.2f} {new_s:>7.2f} {diff_s:>7.2f} {again_s:>8.2f} "
                    f"{len(comparison.tools_skipped):>8} {len(comparison.tools_compared):>7} "
                    f"{comparison.queries:>8} {len(comparison.regions):>8} "
                    f"{'yes' if comparison.widened else 'no':>8} {diff_s / target:>12.3f}",
                    flush=True,
                )
                print(f"{'':>6} {what[:110]}")
                old_s = 0.0  # the old side is compiled once per size
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average (1, 5, 15 min): {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
