"""Build cost against spec size: 100, 1,000 and 5,000 tools with 1.5 rules each.

    .venv/bin/python bench/build.py [--sizes 100,1000,5000] [--repeat 1] [--embed]

Prints, per size: spec lines and bytes, the check time (read → analyse), the build time
(check + plan + render + write), the time of plan + render + write alone, the number of files
and the bytes written, split into docs/policies.md, model.json and docs/. Tools have distinct
descriptions, as in a real registry. Without `--embed` no embeddings are computed (the build
ranks lexically); with it, the first run fills the embedding cache.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

from harnessc.compiler import pipeline
from harnessc.compiler.analysis.availability import analyse_availability

VERBS = ("create", "read", "update", "delete", "sync", "export", "import", "archive")
NOUNS = ("invoice", "ticket", "deployment", "report", "user", "dataset", "alert", "branch")


def generate(n_tools: int) -> str:
    """n tools with schemas and availability; 1.5 rules per tool (every tool one, every other
    tool a second with a reason), under a risk-table default and the guardrails."""
    out = [
        'harness bench {\n  version "1.0.0"\n  summary "Generated benchmark spec."\n}\n\n',
        'import std.risk\n\nconnection github "GitHub account"\n',
        "fact workspace.open: bool\n\n",
    ]
    for i in range(n_tools):
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
        out.append(
            f"tool svc{i}.{verb}_{noun} {{\n"
            f"  version 2\n"
            f'  summary "{verb.capitalize()} a {noun} in service {i} (shard {i % 97})."\n'
            f'  use_when "The user asks to {verb} {noun} records held by service {i}."\n'
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
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
        tool = f"svc{i}.{verb}_{noun}"
        out.append(
            f'  r{i}: allow {tool} when actor.role in ["engineer", "sre"] and args.count <= 5\n'
        )
        if i % 2 == 0:
            out.append(
                f'  d{i}: deny {tool} when args.service startswith "prod-" {{\n'
                f'    reason "Service {i} is changed in production only by its owners."\n'
                f"  }}\n"
            )
    out.append("}\n")
    return "".join(out)


def _size(folder: Path) -> tuple[int, int, int, int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    policies = sum(p.stat().st_size for p in files if p.name == "policies.md")
    model = sum(p.stat().st_size for p in files if p.name == "model.json")
    docs = sum(p.stat().st_size for p in files if "docs" in p.parts)
    return len(files), total, policies, model, docs


def build_stages(spec: Path, out: Path, embed: bool) -> tuple[dict[str, float], object]:
    """The stages of `pipeline.build`, timed one by one (the same calls, in the same order)."""
    from harnessc.compiler import codegen

    times: dict[str, float] = {}
    start = time.perf_counter()
    checked = pipeline.check([spec])
    times["check"] = time.perf_counter() - start
    assert checked.ok and checked.model is not None and checked.resolution is not None
    start = time.perf_counter()
    embeddings = codegen.tool_embeddings(checked.model) if embed else None
    times["embed"] = time.perf_counter() - start
    start = time.perf_counter()
    available = analyse_availability(checked.model)  # timed with the plan, as it was
    plan = codegen.plan_build(
        checked.model,
        spec.name,
        codegen.lint_suppressions(checked.resolution),
        embeddings,
        analysis=checked.analysis,
        available=available,
    )
    times["plan"] = time.perf_counter() - start
    start = time.perf_counter()
    files = codegen.render_plan(plan)
    times["render"] = time.perf_counter() - start
    start = time.perf_counter()
    codegen.write_files(out, files, plan.package)
    times["write"] = time.perf_counter() - start
    return times, checked


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--embed", action="store_true", help="compute tool embeddings too")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    mb = 1024 * 1024
    print(
        f"{'tools':>6} {'rules':>6} {'lines':>7} {'spec MB':>7} {'check s':>8} {'embed s':>7} "
        f"{'plan s':>7} {'render s':>8} {'write s':>7} {'build s':>8} {'files':>5} "
        f"{'out MB':>7} {'policies':>8} {'model':>6} {'docs':>6} {'out/spec':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            spec = Path(tmp) / f"bench{n}.harness"
            text = generate(n)
            spec.write_text(text, encoding="utf-8")
            best: dict[str, float] = {}
            for _ in range(args.repeat):
                out = Path(tmp) / f"out{n}"
                shutil.rmtree(out, ignore_errors=True)
                gc.collect()
                times, checked = build_stages(spec, out, args.embed)
                for key, value in times.items():
                    best[key] = min(best.get(key, value), value)
            files, total, policies, model, docs = _size(out)
            rules = sum(len(p.rules) for p in checked.model.policies.values())  # type: ignore[attr-defined]
            spec_bytes = len(text.encode())
            print(
                f"{n:>6} {rules:>6} {text.count(chr(10)):>7} {spec_bytes / mb:>7.2f} "
                f"{best['check']:>8.2f} {best['embed']:>7.2f} {best['plan']:>7.2f} "
                f"{best['render']:>8.2f} {best['write']:>7.2f} {sum(best.values()):>8.2f} "
                f"{files:>5} {total / mb:>7.2f} {policies / mb:>7.2f}M {model / mb:>5.2f}M "
                f"{docs / mb:>5.2f}M {total / spec_bytes:>8.1f}"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
